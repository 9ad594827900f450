// A `<button data-copy="ID">` copies the text of element ID (no inline handlers: CSP) and says
// so in #api-key-copied; without the clipboard API it selects the text for Ctrl+C instead.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  const status = document.getElementById("api-key-copied");
  const say = (text) => { if (status) status.textContent = text; };
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    say("Copied.");
  } catch (error) {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    say("Selected: press Ctrl+C (⌘C) to copy.");
  }
});
