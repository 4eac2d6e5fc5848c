// Building DOM nodes without innerHTML: every value from the API becomes text, never
// markup, so a job name like "<img onerror=...>" is shown, not run.

const SVG_NS = "http://www.w3.org/2000/svg";

/** Set attributes, handlers ("onclick") and text on an element. */
function assign(element, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else if (key === "text") {
      element.textContent = String(value);
    } else {
      element.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** An HTML element: h("a", {href: "#/jobs"}, "Jobs"). */
export function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  assign(element, attrs);
  return append(element, children);
}

/** An SVG element, for the task graph. */
export function s(tag, attrs, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  assign(element, attrs);
  return append(element, children);
}

/** Replace an element's children. */
export function fill(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}
