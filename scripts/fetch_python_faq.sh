#!/usr/bin/env bash
# Fetch the held-out corpus (Python 3.11 FAQ) from Debian and check it against the committed
# copies in demo/python_faq/pages. Cached and idempotent: the .deb is downloaded once into
# ${SUPPORTBOT_VAR_DIR:-var}/cache/python3.11-doc.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${SUPPORTBOT_VAR_DIR:-var}/cache/python3.11-doc"
mkdir -p "$CACHE"
if ! ls "$CACHE"/python3.11-doc_*.deb >/dev/null 2>&1; then
  (cd "$CACHE" && apt-get download python3.11-doc)
fi
DEB=$(ls "$CACHE"/python3.11-doc_*.deb | head -1)
rm -rf "$CACHE/x" && dpkg -x "$DEB" "$CACHE/x"
FAQ="$CACHE/x/usr/share/doc/python3.11/html/faq"
echo "package: $(basename "$DEB")"
(cd demo/python_faq && while read -r sum path; do
  echo "$sum  $FAQ/$(basename "$path")"
done < pages.sha256) | sha256sum -c -
