// Posts the deep-linking response back to the LMS as soon as the page loads (the button is the
// fallback when scripts are off).
for (const form of document.querySelectorAll("form[data-autosubmit]")) {
  form.submit();
}
