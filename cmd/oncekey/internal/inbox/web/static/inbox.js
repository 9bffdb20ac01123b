// oncekey inbox: small helpers for the resolution form. The page works without them.
(function () {
  "use strict";
  function setup() {
    var form = document.getElementById("resolve-form");
    if (!form) return;
    var appliedOnly = form.querySelector(".applied-only");
    var result = document.getElementById("result");
    var check = document.getElementById("json-check");
    // Only "applied" takes an effect reference and a result: hide and disable them otherwise.
    function outcomeChanged() {
      var applied = document.getElementById("outcome-applied").checked;
      appliedOnly.hidden = !applied;
      appliedOnly.querySelectorAll("input, textarea").forEach(function (el) { el.disabled = !applied; });
    }
    // Say at once when the result is not JSON (the server and the workflow check it again).
    function resultChanged() {
      var v = result.value.trim();
      if (v === "") { check.textContent = "empty: the zero value of the result type"; check.className = "json-check"; return; }
      try { JSON.parse(v); check.textContent = "valid JSON"; check.className = "json-check ok"; }
      catch (e) { check.textContent = "not valid JSON: " + e.message; check.className = "json-check bad"; }
    }
    form.querySelectorAll("input[name=outcome]").forEach(function (el) { el.addEventListener("change", outcomeChanged); });
    result.addEventListener("input", resultChanged);
    outcomeChanged();
    resultChanged();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup); else setup();
})();
