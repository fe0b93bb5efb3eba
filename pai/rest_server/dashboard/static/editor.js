// A plain text editor for job documents: a textarea (no wrapping, so that a line of text is a line on screen) with
// line numbers beside it, Tab as two spaces, and one marked line (an error's: its number in the gutter turns red,
// the line gets a band behind it, the message is the number's title).
import { h } from "./dom.js";

/** {el, textarea, value (get/set), mark(line, message), focus()}; `onInput` after each change by the user. */
export function editor({ label = "document", onInput = () => {} } = {}) {
  const textarea = h("textarea", { spellcheck: "false", wrap: "off", autocomplete: "off", "aria-label": label,
    autocapitalize: "off", rows: 24 });
  const lines = h("div.gutter-lines");
  const gutter = h("div.gutter", { "aria-hidden": "true" }, lines);
  const band = h("div.band", { hidden: true });
  const el = h("div.editor", {}, gutter, h("div.code", {}, band, textarea));
  let count = 0, marked = null; // {line, message}

  function numbers() {
    const n = textarea.value.split("\n").length;
    if (n !== count) {
      lines.replaceChildren(...Array.from({ length: n }, (_, i) => h("div", { "data-line": i + 1 }, String(i + 1))));
      count = n;
    }
    paintMark();
  }

  function paintMark() {
    for (const old of lines.querySelectorAll(".marked")) {
      old.classList.remove("marked");
      old.removeAttribute("title");
    }
    const row = marked && lines.querySelector(`[data-line="${marked.line}"]`);
    band.hidden = !row;
    if (!row) return;
    row.classList.add("marked");
    row.title = marked.message;
    band.style.top = `${row.offsetTop - textarea.scrollTop}px`;
    band.style.height = `${row.offsetHeight}px`;
  }

  function scrolled() {
    gutter.scrollTop = textarea.scrollTop;
    if (marked) paintMark();
  }

  textarea.addEventListener("input", () => { numbers(); onInput(textarea.value); });
  textarea.addEventListener("scroll", scrolled);
  textarea.addEventListener("keydown", (e) => {
    if (e.key !== "Tab" || e.shiftKey || e.ctrlKey || e.altKey || e.metaKey) return;
    e.preventDefault(); // YAML is indented with spaces; execCommand keeps the browser's undo history
    if (!document.execCommand("insertText", false, "  ")) textarea.setRangeText("  ", textarea.selectionStart,
      textarea.selectionEnd, "end");
  });

  return {
    el, textarea,
    get value() { return textarea.value; },
    set value(text) {
      textarea.value = text;
      textarea.scrollTop = 0;
      numbers();
    },
    /** Mark `line` (1-based) with `message`; mark(null) clears the mark. */
    mark(line, message = "") {
      marked = line ? { line, message } : null;
      paintMark();
    },
    /** Put the cursor at the start of `line` and bring it into view. */
    reveal(line) {
      const at = textarea.value.split("\n").slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
      textarea.focus();
      textarea.setSelectionRange(at, at);
      const row = lines.querySelector(`[data-line="${line}"]`);
      if (row) textarea.scrollTop = Math.max(0, row.offsetTop - textarea.clientHeight / 3);
      scrolled();
    },
    focus() { textarea.focus(); },
  };
}
