// KaTeX, served by the site itself (docs/assets/katex, v0.16.11, MIT): renders the math that
// pymdownx.arithmatex marks, on every page load (Material's instant navigation included).
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "$", right: "$", display: false },
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
  });
});
