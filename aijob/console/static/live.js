// Live parts: an element with data-live="URL" is fetched again every 2 s (its HTML rendered and
// escaped by the server), and with data-select="CSS" only that part of the answer is taken. It
// stops once what it shows holds an element marked data-final (a job that has ended).
"use strict";
for (const element of document.querySelectorAll("[data-live]")) {
  const refresh = async () => {
    try {
      const answer = await fetch(element.dataset.live, { credentials: "same-origin" });
      if (answer.ok) {
        const html = await answer.text();
        const selector = element.dataset.select;
        if (selector) {
          const fresh = new DOMParser().parseFromString(html, "text/html").querySelector(selector);
          if (fresh) element.innerHTML = fresh.innerHTML;
        } else {
          element.innerHTML = html;
        }
      }
    } catch (error) {
      // The console or the scheduler is away for a moment: try again at the next tick.
    }
    if (!element.querySelector("[data-final]")) setTimeout(refresh, 2000);
  };
  setTimeout(refresh, 2000);
}
