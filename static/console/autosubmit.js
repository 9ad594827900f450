// Submit a form when one of its `<select data-autosubmit>` changes (no inline handlers: CSP).
document.addEventListener("change", (event) => {
  const target = event.target;
  if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit") && target.form) {
    target.form.submit();
  }
});
