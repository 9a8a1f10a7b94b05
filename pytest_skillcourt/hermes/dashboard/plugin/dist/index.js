// Skill Court tab for Hermes' dashboard (pytest-skillcourt). Hand-written, no build step:
// it renders with the host's React through window.__HERMES_PLUGIN_SDK__ and calls the
// plugin's routes at /api/plugins/skill-court/ with the SDK's fetchJSON (which carries the
// dashboard's session token). Every text from the store is rendered as a React text node.
// Changes (quarantine, release, apply fix) also carry the profile owner's dashboard secret
// (X-Skill-Court-Secret): Hermes hands its session token to any local user, so the routes
// refuse a change without the secret. The user pastes it once ("Unlock changes"); it is
// checked (POST unlock) and kept in this browser's localStorage under the profile's home.
(function () {
  "use strict";
  var SDK = window.__HERMES_PLUGIN_SDK__;
  if (!SDK || !window.__HERMES_PLUGINS__) return;
  var React = SDK.React;
  var h = React.createElement;
  var useState = SDK.hooks.useState;
  var useEffect = SDK.hooks.useEffect;
  var useCallback = SDK.hooks.useCallback;
  var API = "/api/plugins/skill-court";
  var SECRET_HEADER = "X-Skill-Court-Secret";
  var SECRET_KEY = "skill-court.dashboard-secret:";
  var KINDS = ["HURTS", "INCONCLUSIVE", "NEUTRAL", "HELPS"];
  var SYMBOL = { HELPS: "\u25B2", HURTS: "\u25BC", NEUTRAL: "\u25CF", INCONCLUSIVE: "?" };

  function pct(x) { return x === null || x === undefined ? "-" : Math.round(100 * x) + "%"; }
  function pctCi(ci) { return ci && ci.length === 2 ? Math.round(100 * ci[0]) + "\u2013" + Math.round(100 * ci[1]) + "%" : ""; }
  function signed(x) { return (x >= 0 ? "+" : "") + x.toFixed(2); }
  function ci(ci, f) { return ci && ci.length === 2 ? "[" + f(ci[0]) + ", " + f(ci[1]) + "]" : ""; }
  function fixed2(x) { return x.toFixed(2); }
  function errorText(err) {
    var text = String((err && err.message) || err);
    var m = text.match(/^\d+: (.*)$/s);
    if (m) {
      try { var body = JSON.parse(m[1]); if (body && body.detail) return typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail); } catch (e) { /* plain text */ }
      return m[1];
    }
    return text;
  }
  function post(path, body, secret) {
    var headers = { "Content-Type": "application/json" };
    if (secret) headers[SECRET_HEADER] = secret;
    return SDK.fetchJSON(API + path, { method: "POST", headers: headers, body: JSON.stringify(body || {}) });
  }
  // The secret is kept per profile (its home), so one profile's secret is never sent to another's dashboard.
  function storedSecret(home) {
    try { return window.localStorage.getItem(SECRET_KEY + home) || ""; } catch (e) { return ""; }
  }
  function storeSecret(home, value) {
    try {
      if (value) window.localStorage.setItem(SECRET_KEY + home, value);
      else window.localStorage.removeItem(SECRET_KEY + home);
    } catch (e) { /* storage off: the secret lives until the page is closed */ }
  }
  function refusedForSecret(err) { return /^403: /.test(String((err && err.message) || err)); }

  function Unlock(props) {
    var v = useState(""), value = v[0], setValue = v[1];
    if (props.secret) {
      return h("div", { className: "sc-unlock sc-unlocked", id: "sc-unlock" },
        h("span", null, "Changes unlocked in this browser"),
        h("button", { type: "button", className: "sc-btn", "data-action": "lock", onClick: props.lock }, "Lock"));
    }
    function submit(ev) { ev.preventDefault(); if (value.trim()) props.unlock(value.trim()); }
    return h("form", { className: "sc-unlock", id: "sc-unlock", onSubmit: submit },
      h("p", null, h("b", null, "Changes are locked. "),
        "Quarantine, release and apply fix need the profile owner\u2019s dashboard secret: run ",
        h("code", null, "cat " + props.file), " as that user and paste the line here (this browser keeps it)."),
      h("div", { className: "sc-row" },
        h("label", null, "Unlock changes ",
          h("input", { type: "password", id: "sc-secret", autoComplete: "off", spellCheck: false, value: value,
                       onChange: function (ev) { setValue(ev.target.value); } })),
        h("button", { type: "submit", className: "sc-btn sc-btn-primary", "data-action": "unlock",
                      disabled: props.busy || !value.trim() }, "Unlock")));
  }

  function Badge(props) {
    return h("span", { className: "sc-badge sc-k-" + String(props.kind || "").toLowerCase() },
      h("span", { "aria-hidden": "true" }, SYMBOL[props.kind] || ""), " ", props.kind);
  }

  function Fact(props) {
    return h("div", { className: "sc-fact" }, h("dt", null, props.label), h("dd", null, props.children));
  }

  function Diff(props) {
    var lines = String(props.text || "").split("\n");
    return h("pre", { className: "sc-diff" }, lines.map(function (line, i) {
      var cls = line.indexOf("+++") === 0 || line.indexOf("---") === 0 ? "sc-d-file" :
        line.charAt(0) === "+" ? "sc-d-add" : line.charAt(0) === "-" ? "sc-d-del" : line.indexOf("@@") === 0 ? "sc-d-hunk" : "";
      return h("span", { key: i, className: cls }, line + "\n");
    }));
  }

  function Quarantine(props) {
    var v = props.v, q = v.quarantine;
    var who = q ? (q.every_model ? "every model" : "model " + q.model) : "";
    return h("div", { className: "sc-quarantine" + (q ? " sc-hidden" : "") },
      q ? h("span", { className: "sc-qstate" },
        "Hidden from " + who + " \u00B7 ",
        h("b", { className: q.by_hand ? "sc-byhand" : "sc-bytrial" }, q.by_hand ? "set by hand" : "set by a trial"),
        q.since ? " since " + q.since : "", q.reason ? " \u00B7 " + q.reason : "")
        : h("span", { className: "sc-qstate" }, "Not quarantined for this model"),
      q ? h("button", { type: "button", className: "sc-btn", "data-action": "release", disabled: props.busy,
                        onClick: function () { props.act("release", { skill: q.skill, model: q.model }); } },
            q.every_model ? "Release (every model)" : "Release")
        : h("button", { type: "button", className: "sc-btn sc-btn-warn", "data-action": "quarantine", disabled: props.busy,
                        onClick: function () { props.act("quarantine", { skill: v.skill, model: v.model }); } },
            "Quarantine"));
  }

  function Appeal(props) {
    var a = props.appeal;
    if (!a) return null;
    if (a.decision !== "granted") {
      return h("div", { className: "sc-appeal sc-appeal-denied" },
        h("b", null, "Appeal " + a.id + " " + a.decision), " \u00B7 ", a.reason);
    }
    var applied = a.status === "applied";
    return h("div", { className: "sc-appeal", "data-appeal": a.id },
      h("h4", null, applied ? "Fix applied" : "Fix proposed", h("span", { className: "sc-muted" }, " appeal " + a.id + " \u00B7 " + a.created_at)),
      h("p", null, a.reason, a.draft_trial ? h("span", { className: "sc-muted" }, " (draft's trial " + a.draft_trial + ": " + (a.draft_verdict || "?") + ")") : null),
      h("details", { className: "sc-diffbox", open: !applied }, h("summary", null, "diff of " + a.file), h(Diff, { text: a.diff })),
      applied ? h("p", { className: "sc-muted" }, "applied at " + a.applied_at) :
        h("div", { className: "sc-row" },
          h("button", { type: "button", className: "sc-btn sc-btn-primary", "data-action": "apply", disabled: props.busy || !a.applicable,
                        onClick: function () { props.ask(a); } }, "Apply fix"),
          a.applicable ? null : h("span", { className: "sc-muted" }, a.why_not)));
  }

  function ModelCard(props) {
    var v = props.v;
    var cause = v.cause;
    return h("article", { className: "sc-card sc-k-" + v.kind.toLowerCase(), "data-skill": v.skill, "data-model": v.model, "data-kind": v.kind },
      h("header", { className: "sc-card-head" }, h("span", { className: "sc-model" }, v.model), h(Badge, { kind: v.kind }),
        v.basis === "tokens" ? h("span", { className: "sc-muted" }, " (cost)") : null,
        v.basis === "early-stop" ? h("span", { className: "sc-muted" }, " (early stop)") : null),
      h("p", { className: "sc-line" }, v.line),
      h("dl", { className: "sc-facts" },
        h(Fact, { label: "success with" }, pct(v.success_with), " ", h("span", { className: "sc-muted" }, pctCi(v.wilson_with))),
        h(Fact, { label: "success without" }, pct(v.success_without), " ", h("span", { className: "sc-muted" }, pctCi(v.wilson_without))),
        h(Fact, { label: "difference" }, v.diff_ci ? [signed(v.mean_diff), " ", h("span", { key: "c", className: "sc-muted" }, ci(v.diff_ci, signed))] : "-"),
        h(Fact, { label: "tokens w/wo" }, v.token_ratio ? ["\u00D7" + v.token_ratio.toFixed(2), " ", h("span", { key: "c", className: "sc-muted" }, ci(v.token_ci, fixed2))] : "-"),
        h(Fact, { label: "outcomes" }, v.n_check + " from checks, " + v.n_judge + " from the judge"),
        h(Fact, { label: "changed since" }, h("span", { className: v.changed === "no" ? "" : "sc-warn" }, v.changed), v.changed !== "no" && v.changed_detail ? h("span", { className: "sc-muted" }, " \u00B7 " + v.changed_detail) : null),
        h(Fact, { label: "trial" }, v.automatic ? "automatic" : "started by hand", h("span", { className: "sc-muted" }, " \u00B7 " + v.trial + " \u00B7 " + v.made_at))),
      cause ? h("div", { className: "sc-cause" }, h("b", null, "Cause "), cause.text,
        cause.line ? h("div", { className: "sc-skill-line" },
          h("span", { className: "sc-muted" }, cause.line_no ? "SKILL.md line " + cause.line_no : "SKILL.md line (not in the current file)"),
          h("blockquote", null, cause.line)) : null) : null,
      v.hint ? h("div", { className: "sc-hint" }, h("b", null, "Hint "), v.hint) : null,
      h(Quarantine, { v: v, busy: props.busy, act: props.act }),
      h(Appeal, { appeal: v.appeal, busy: props.busy, ask: props.ask }),
      h("div", { className: "sc-row" }, h("button", { type: "button", className: "sc-link", "data-action": "evidence", onClick: function () { props.evidence(v.trial); } }, "Evidence: the trial's report")));
  }

  function Dialog(props) {
    var a = props.appeal;
    return h("div", { className: "sc-overlay", onKeyDown: function (ev) { if (ev.key === "Escape") props.cancel(); } },
      h("div", { className: "sc-dialog", id: "sc-dialog", role: "dialog", "aria-modal": "true", "aria-labelledby": "sc-dialog-title" },
        h("h3", { id: "sc-dialog-title" }, "Apply fix from appeal " + a.id + "?"),
        h("p", null, "This overwrites ", h("code", { className: "sc-file" }, a.file), " with the draft that won its trial, and lifts the quarantine a trial set for this model. `hermes court appeal undo` writes the original back."),
        h("div", { className: "sc-row" },
          h("button", { type: "button", className: "sc-btn sc-btn-primary", "data-action": "confirm", onClick: props.confirm }, "Overwrite SKILL.md"),
          h("button", { type: "button", className: "sc-btn", "data-action": "cancel", autoFocus: true, onClick: props.cancel }, "Cancel"))));
  }

  function SkillCourtPage() {
    var s = useState(null), data = s[0], setData = s[1];
    var e = useState(null), loadError = e[0], setLoadError = e[1];
    var b = useState(false), busy = b[0], setBusy = b[1];
    var m = useState(null), message = m[0], setMessage = m[1];
    var d = useState(null), asking = d[0], setAsking = d[1];
    var r = useState(null), report = r[0], setReport = r[1];
    var f = useState("all"), kindFilter = f[0], setKindFilter = f[1];
    var t = useState(""), text = t[0], setText = t[1];
    var k = useState(""), secret = k[0], setSecret = k[1];
    var home = data ? String(data.hermes_home || data.store) : null;
    useEffect(function () { if (home !== null) setSecret(storedSecret(home)); }, [home]);

    var load = useCallback(function () {
      return SDK.fetchJSON(API + "/state").then(function (got) { setData(got); setLoadError(null); })
        .catch(function (err) { setLoadError(errorText(err)); });
    }, []);
    useEffect(function () { load(); }, [load]);

    function done(promise, ok) {
      setBusy(true);
      return promise.then(function (res) { setMessage({ ok: true, text: ok(res) }); })
        .catch(function (err) {
          if (refusedForSecret(err)) { storeSecret(home, ""); setSecret(""); }  // wrong or replaced: ask again
          setMessage({ ok: false, text: errorText(err) });
        })
        .then(function () { setBusy(false); return load(); });
    }
    function unlock(value) {
      setBusy(true);
      return post("/unlock", {}, value).then(function () {
        storeSecret(home, value); setSecret(value);
        setMessage({ ok: true, text: "Changes unlocked in this browser" });
      }).catch(function (err) { setMessage({ ok: false, text: errorText(err) }); })
        .then(function () { setBusy(false); });
    }
    function lock() { storeSecret(home, ""); setSecret(""); setMessage({ ok: true, text: "Changes locked in this browser" }); }
    function act(what, target) {
      return done(post("/" + what, target, secret), function (res) {
        return what === "release" ? "Released " + target.skill + " for " + target.model + " in " + res.file
          : "Quarantined " + target.skill + " for " + target.model + " (set by hand) in " + res.file;
      });
    }
    function confirmApply() {
      var a = asking;
      setAsking(null);
      return done(post("/appeals/" + a.id + "/apply", { file: a.file }, secret), function (res) {
        return "Applied appeal " + res.applied + ": " + res.file + " now holds the draft" +
          (res.lifted.length ? "; lifted the quarantine for " + res.lifted.map(function (x) { return x.model; }).join(", ") : "");
      });
    }
    function evidence(trial) {
      setReport({ trial: trial, html: null });
      SDK.fetchJSON(API + "/report?trial=" + encodeURIComponent(trial)).then(function (got) { setReport(got); })
        .catch(function (err) { setReport(null); setMessage({ ok: false, text: errorText(err) }); });
    }

    if (loadError) return h("div", { className: "sc-page" }, h("div", { className: "sc-message sc-error", role: "alert" }, loadError));
    if (!data) return h("div", { className: "sc-page" }, h("p", { className: "sc-muted" }, "Loading the court\u2019s verdicts\u2026"));

    var counts = {};
    data.skills.forEach(function (g) { g.verdicts.forEach(function (v) { counts[v.kind] = (counts[v.kind] || 0) + 1; }); });
    var needle = text.trim().toLowerCase();
    var groups = data.skills.map(function (g) {
      var vs = g.verdicts.filter(function (v) {
        return (kindFilter === "all" || v.kind === kindFilter) &&
          (!needle || v.skill.toLowerCase().indexOf(needle) >= 0 || v.model.toLowerCase().indexOf(needle) >= 0);
      });
      return { skill: g.skill, worst: g.worst, verdicts: vs };
    }).filter(function (g) { return g.verdicts.length; });
    var sp = data.spend_today;

    return h("div", { className: "sc-page" },
      h("header", { className: "sc-head" },
        h("h2", null, "Skill Court"),
        h("p", { className: "sc-tally" }, KINDS.filter(function (k) { return counts[k]; }).map(function (k) {
          return h("span", { key: k, className: "sc-badge sc-k-" + k.toLowerCase() }, SYMBOL[k] + " " + counts[k] + " " + k);
        })),
        h("p", { className: "sc-spend", "data-spend": sp.spend_usd },
          "Automatic trials today (" + sp.date + "): " + sp.auto_trials + " \u00B7 spend $" + Number(sp.spend_usd).toFixed(4) +
          " \u00B7 judge tokens " + sp.judge_tokens, h("span", { className: "sc-muted" }, " (" + sp.source + ")")),
        h("p", { className: "sc-muted sc-paths" }, "store ", h("code", null, data.store), " \u00B7 quarantine file ", h("code", null, data.quarantine_file))),
      h(Unlock, { secret: secret, file: data.secret_file, busy: busy, unlock: unlock, lock: lock }),
      message ? h("div", { className: "sc-message " + (message.ok ? "sc-ok" : "sc-error"), role: message.ok ? "status" : "alert", id: "sc-message" }, message.text) : null,
      data.problems.length ? h("ul", { className: "sc-problems" }, data.problems.map(function (p, i) { return h("li", { key: i }, p); })) : null,
      h("div", { className: "sc-filters" },
        h("label", null, "verdict ", h("select", { value: kindFilter, onChange: function (ev) { setKindFilter(ev.target.value); } },
          [h("option", { key: "all", value: "all" }, "all")].concat(KINDS.map(function (k) { return h("option", { key: k, value: k }, k); })))),
        h("label", null, "skill or model ", h("input", { type: "search", value: text, onChange: function (ev) { setText(ev.target.value); } }))),
      groups.length ? null : h("p", { className: "sc-muted" }, data.skills.length ? "No verdict matches the filter." : "No verdict yet."),
      groups.map(function (g) {
        return h("section", { key: g.skill, className: "sc-skill", "data-skill": g.skill },
          h("h3", null, g.skill, " ", h(Badge, { kind: g.worst })),
          h("div", { className: "sc-models" }, g.verdicts.map(function (v) {
            return h(ModelCard, { key: v.model, v: v, busy: busy, act: act, ask: setAsking, evidence: evidence });
          })));
      }),
      data.other_entries.length ? h("section", { className: "sc-skill sc-others" },
        h("h3", null, "Other quarantine entries ", h("span", { className: "sc-muted" }, "(no verdict in the store)")),
        data.other_entries.map(function (q) {
          return h("div", { key: q.skill + "\u0000" + q.model, className: "sc-quarantine sc-hidden", "data-skill": q.skill, "data-model": q.model },
            h("span", { className: "sc-qstate" }, q.skill + " hidden from " + (q.every_model ? "every model" : q.model) + " \u00B7 ",
              h("b", { className: q.by_hand ? "sc-byhand" : "sc-bytrial" }, q.by_hand ? "set by hand" : "set by a trial")),
            h("button", { type: "button", className: "sc-btn", "data-action": "release", disabled: busy,
                          onClick: function () { act("release", { skill: q.skill, model: q.model }); } }, "Release"));
        })) : null,
      report ? h("section", { className: "sc-report" },
        h("div", { className: "sc-row" }, h("b", null, "Report of trial " + report.trial),
          h("button", { type: "button", className: "sc-btn", onClick: function () { setReport(null); } }, "Close")),
        report.html === null ? h("p", { className: "sc-muted" }, "Loading\u2026") :
          h("iframe", { title: "report of trial " + report.trial, sandbox: "", srcDoc: report.html, className: "sc-frame" })) : null,
      asking ? h(Dialog, { appeal: asking, confirm: confirmApply, cancel: function () { setAsking(null); } }) : null);
  }

  window.__HERMES_PLUGINS__.register("skill-court", SkillCourtPage);
})();
