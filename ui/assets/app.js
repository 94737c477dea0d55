// taskloom ui: follows a run through Server-Sent Events and shows a task's
// detail and review actions. The server renders the page and the graph;
// this script only updates them. Text always goes in as textContent.
(function () {
  'use strict';

  const meta = (name) => document.querySelector('meta[name="' + name + '"]').content;
  const csrf = meta('taskloom-csrf');
  const runID = meta('taskloom-run');
  const api = '/api/runs/' + encodeURIComponent(runID);
  const $ = (sel) => document.querySelector(sel);

  let run = null;
  let openID = null;
  let openStatus = null;

  // el builds an element: attrs are properties or attributes, kids are
  // nodes or strings (as text).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat(Infinity)) {
      if (k === undefined || k === null || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const statusText = (s) => String(s).replace(/_/g, ' ');
  const num = (n) => Number(n || 0).toLocaleString('en-US');
  // An agent CLI that reports no usage leaves its calls uncounted: say so,
  // rather than show what was counted as the whole cost.
  const cost = (u) => (u.cost_usd === null || u.cost_usd === undefined ? 'no price' : '$' + u.cost_usd.toFixed(4)) +
    (u.unreported ? ' (not counted: the agent CLI\'s own calls)' : '');
  const firstLine = (s) => { const l = String(s || '').split('\n')[0]; return l.length > 160 ? l.slice(0, 159) + '…' : l; };

  // readJSON reads a reply's JSON body; a refusal in plain text (the
  // guard's, after the ui restarted) becomes {error: its text}.
  async function readJSON(res) {
    const text = await res.text();
    try {
      return JSON.parse(text);
    } catch (err) {
      if (res.status === 401 || res.status === 403) return { error: text.trim() + ' (reload the page)' };
      return { error: text.trim() || res.statusText };
    }
  }

  function duration(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + 'h' : '') + (h || m ? m + 'm' : '') + r + 's';
  }

  function nodeOf(id) {
    return document.getElementById('node-' + id);
  }

  // Graph.

  function bindGraph() {
    document.querySelectorAll('#graph .node').forEach((g) => {
      g.addEventListener('click', () => openTask(g.dataset.task));
      g.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          openTask(g.dataset.task);
        }
      });
    });
    markSelected();
  }

  function markSelected() {
    document.querySelectorAll('#graph .node').forEach((g) => g.classList.toggle('selected', g.dataset.task === openID));
  }

  function applyStatuses(r) {
    for (const t of r.tasks) {
      const g = nodeOf(t.id);
      if (!g) continue;
      g.dataset.status = t.status;
      g.classList.forEach((c) => c.startsWith('st-') && g.classList.remove(c));
      g.classList.add('st-' + t.status);
      g.classList.toggle('critical', t.critical);
      g.setAttribute('aria-label', t.label);
      g.querySelector('title').textContent = t.label;
      g.querySelector('.status').textContent = statusText(t.status);
    }
    markSelected();
  }

  async function applyGraph(r) {
    const box = $('#graph-box');
    const shown = ($('#graph') && $('#graph').dataset.tasks) || '';
    const want = r.tasks.map((t) => t.id).join(' ');
    if (shown.split(' ').sort().join(' ') !== want.split(' ').sort().join(' ')) {
      const res = await fetch('/runs/' + encodeURIComponent(runID) + '/graph', { credentials: 'same-origin' });
      if (res.ok) {
        box.innerHTML = await res.text(); // rendered by the server's template
        bindGraph();
      }
    }
    applyStatuses(r);
  }

  // Panels.

  function applyRun(r) {
    run = r;
    const badge = $('#run-status');
    badge.textContent = r.status;
    badge.className = 'badge run-' + r.status;
    $('#live').hidden = r.status !== 'running';
    $('#run-reason').textContent = r.reason || '';
    $('#run-reason').hidden = !r.reason;
    $('#progress').textContent = r.summary.completed + '/' + r.summary.total + ' completed (' + r.summary.progress + ')';
    applyGraph(r);

    const esc = $('#escalations');
    esc.replaceChildren(...(r.escalations.length
      ? r.escalations.map((e) => el('li', {}, el('button', { type: 'button', class: 'link', 'data-open': e.task_id, onclick: () => openTask(e.task_id) }, e.task_id), ' ' + e.reason + (e.error ? ': ' + firstLine(e.error) : '')))
      : [el('li', { class: 'none' }, 'none')]));
    // Decisions taken in review (here, in another tab or with taskloom
    // review) that the run has not acted on: resume does.
    $('#decisions').replaceChildren(...(r.decisions || []).map((d) => el('li', {},
      el('button', { type: 'button', class: 'link', 'data-open': d.task_id, onclick: () => openTask(d.task_id) }, d.task_id),
      ' ' + d.action + (d.note ? ' (note: ' + d.note + ')' : '') + ', acted on when the run resumes')));

    $('#resume-box').hidden = !r.resume_now;
    $('#resume-cmd').textContent = r.resume;
    renderWorkers();
    renderUsage(r);

    if (openID) {
      const t = r.tasks.find((x) => x.id === openID);
      const typing = document.activeElement && document.activeElement.closest && document.activeElement.closest('#detail');
      if (t && t.status !== openStatus && !typing) openTask(openID);
    }
  }

  function renderWorkers() {
    if (!run) return;
    const body = $('#workers tbody');
    if (!run.workers.length) {
      body.replaceChildren(el('tr', {}, el('td', { colspan: 5, class: 'none' }, 'no task in progress')));
      return;
    }
    const now = Date.now();
    body.replaceChildren(...run.workers.map((w) => el('tr', {},
      el('td', {}, w.host || String(w.worker)),
      el('td', {}, el('button', { type: 'button', class: 'link', onclick: () => openTask(w.task_id) }, w.task_id)),
      el('td', { class: 'num' }, w.attempt),
      el('td', { class: 'num' }, w.since ? duration(now - Date.parse(w.since)) : '–'),
      el('td', {}, w.activity))));
  }

  function renderUsage(r) {
    const u = r.usage;
    $('#usage').textContent = num(u.input_tokens) + ' input, ' + num(u.output_tokens) + ' output, ' +
      num(u.cache_read_tokens) + ' cache read, ' + num(u.cache_write_tokens) + ' cache write tokens; ' + cost(u) +
      (u.estimated ? ' (partly estimated)' : '') + (r.model ? ' · ' + r.model : '');
    $('#task-usage tbody').replaceChildren(...r.tasks.map((t) => el('tr', {},
      el('td', {}, t.id),
      el('td', { class: 'num' }, num(t.usage.input_tokens)),
      el('td', { class: 'num' }, num(t.usage.output_tokens)),
      el('td', { class: 'num' }, cost(t.usage)))));
  }

  function addEvent(ev) {
    const parts = [ev.ts.slice(11, 19), ev.type];
    for (const k of ['task_id', 'attempt', 'status', 'reason', 'error', 'commit']) {
      if (ev[k] !== undefined && ev[k] !== '' && !(k === 'attempt' && !ev[k])) parts.push(k === 'attempt' ? '#' + ev[k] : ev[k]);
    }
    if (ev.type === 'task_verified') parts.push(ev.passed ? 'passed' : 'failed');
    if (ev.type === 'provider_wait') $('#waits').textContent = 'provider wait: ' + ev.reason + ' (' + ev.seconds + 's)';
    const list = $('#events');
    list.prepend(el('li', {}, parts.join(' ')));
    while (list.children.length > 200) list.lastChild.remove();
  }

  // Task detail.

  function pre(text, cls) {
    const p = el('pre', { class: cls || '' });
    if (cls === 'diff') {
      for (const line of text.split('\n')) {
        const c = line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
        p.append(c ? el('span', { class: c }, line) : line, '\n');
      }
    } else {
      p.textContent = text;
    }
    return p;
  }

  function list(items) {
    return items && items.length ? el('ul', {}, items.map((i) => el('li', {}, i))) : el('p', { class: 'none' }, 'none');
  }

  function facts(pairs) {
    return el('dl', { class: 'facts' }, pairs.filter((p) => p[1] !== '' && p[1] !== undefined).map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  function reviewBox(d) {
    const note = el('textarea', { id: 'review-note', 'aria-label': 'Note for the worker (with retry)', placeholder: 'Note for the worker\'s next attempt (optional, with retry)' });
    const out = el('div', { id: 'review-result', role: 'status' });
    const act = (action, label, cls, help) => el('button', { type: 'button', class: cls, 'data-action': action, title: help,
      onclick: () => review(d.task.id, action, action === 'retry' ? note.value : '', out) }, label);
    return el('div', { class: 'review' },
      el('h3', {}, 'Review: ' + d.escalation.reason),
      d.escalation.error ? el('pre', { class: 'why' }, d.escalation.error) : null,
      el('p', {}, 'Recorded as taskloom review --task ' + d.task.id + ' --action … records it; then resume the run.'),
      note,
      el('div', { class: 'actions' },
        act('fixed', 'Fixed', '', 'I fixed it by hand: mark it completed and continue'),
        act('retry', 'Retry', 'primary', 'Give it max_attempts fresh attempts, with the note'),
        act('skip', 'Skip', '', 'Mark it skipped; its dependents become blocked'),
        act('abort', 'Abort run', 'danger', 'End the run as aborted')),
      out);
  }

  async function review(task, action, note, out) {
    if (action === 'abort' && !window.confirm('Abort the whole run? Every escalated task is answered with abort.')) return;
    out.replaceChildren();
    try {
      const res = await fetch(api + '/review', {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-Taskloom-CSRF': csrf },
        body: JSON.stringify({ task: task, action: action, note: note }),
      });
      const body = await readJSON(res);
      if (!res.ok) {
        out.replaceChildren(el('p', { class: 'notice error' }, body.error || res.statusText));
        return;
      }
      const done = body.recorded.map((r) => r.task + ' ' + r.action + (r.note ? ' (note: ' + r.note + ')' : '')).join(', ');
      const next = body.pending.length
        ? ['Still waiting for a decision: ' + body.pending.join(', ') + '.']
        : ['Next: ', el('code', { id: 'resume-next' }, body.resume)];
      out.replaceChildren(el('p', { class: 'notice', id: 'review-recorded' }, 'Recorded: ' + done + '. ', ...next));
    } catch (err) {
      out.replaceChildren(el('p', { class: 'notice error' }, 'The decision was not sent: ' + err.message));
    }
  }

  function conversation(c) {
    return el('details', {}, el('summary', {}, 'Conversation ' + c.id + ' (' + c.messages.length + ' messages)'),
      c.messages.map((m) => el('div', { class: 'msg' + (m.tool ? ' tool' : '') + (m.error ? ' err' : '') },
        m.tool ? [el('strong', {}, m.tool), ' ' + m.args, m.result ? '\n→ ' + m.result : ''] : [el('strong', {}, m.kind || m.type), ' ' + m.text])));
  }

  function attempt(a, last) {
    return el('details', { class: 'attempt', open: last, 'data-attempt': a.attempt },
      el('summary', {}, 'Attempt ' + a.attempt + (a.in_progress ? ' — not ended (its conversation so far)' : '') +
        (a.tests ? ' — tests ' + a.tests : '') + (a.integrated ? ' — integrated ' + a.integrated.slice(0, 10) : '')),
      facts([['usage', num(a.usage.input_tokens) + ' in, ' + num(a.usage.output_tokens) + ' out, ' + cost(a.usage)],
        ['conflicts', a.conflicts.join(', ')], ['question', a.question]]),
      a.error ? [el('h4', {}, 'Error'), pre(a.error, 'error')] : null,
      a.in_progress ? null : [el('h4', {}, 'Diff'), a.diff ? pre(a.diff, 'diff') : el('p', { class: 'none' }, a.changed ? 'diff not kept' : 'no change')],
      a.test_output ? [el('h4', {}, 'Test output'), pre(a.test_output, 'tests')] : null,
      a.conversation.length ? [el('h4', {}, 'Conversation'), a.conversation.map(conversation)] : null);
  }

  function renderDetail(d) {
    const t = d.task, c = t.complexity;
    $('#detail-h').textContent = t.id + ': ' + t.title;
    $('#detail-body').replaceChildren(el('div', {},
      facts([['status', statusText(d.status) + (d.critical ? ' (on the critical path)' : '')], ['milestone', t.milestone_id],
        ['priority', t.priority], ['attempts', t.attempts + ' of max_attempts ' + t.max_attempts],
        ['dependencies', (t.dependencies || []).join(', ') || 'none'], ['estimate', t.estimated_minutes + ' min'],
        ['complexity', c.total + ' ' + c.level + ' = file_scope ' + c.file_scope + ' + cross_file_deps ' + c.cross_file_deps +
          ' + semantic_complexity ' + c.semantic_complexity + ' + requirement_uncertainty ' + c.requirement_uncertainty +
          ' + token_penalty ' + c.token_penalty],
        ['usage', num(d.usage.input_tokens) + ' in, ' + num(d.usage.output_tokens) + ' out, ' + cost(d.usage)],
        ['error', t.error || '']]),
      d.escalation ? reviewBox(d) : null,
      el('h3', {}, 'Acceptance criteria'), list(t.acceptance_criteria),
      el('h3', {}, 'Files'), list([].concat(
        (t.files_to_create || []).map((f) => 'create ' + f), (t.files_to_modify || []).map((f) => 'modify ' + f),
        (t.test_files || []).map((f) => 'test ' + f))),
      el('h3', {}, 'Attempts'),
      d.attempts.length ? d.attempts.map((a, i) => attempt(a, i === d.attempts.length - 1)) : el('p', { class: 'none' }, 'none yet')));
    $('#detail').hidden = false;
  }

  async function openTask(id) {
    openID = id;
    markSelected();
    const res = await fetch(api + '/tasks/' + encodeURIComponent(id), { credentials: 'same-origin' });
    const d = await readJSON(res);
    if (!res.ok) {
      $('#detail-body').replaceChildren(el('p', { class: 'notice error' }, d.error || res.statusText));
      $('#detail').hidden = false;
      return;
    }
    if (openID !== id) return;
    openStatus = d.status;
    renderDetail(d);
  }

  // Wiring.

  bindGraph();
  document.querySelectorAll('[data-open]').forEach((b) => b.addEventListener('click', () => openTask(b.dataset.open)));
  $('#runs').addEventListener('change', (e) => { window.location.href = '/runs/' + encodeURIComponent(e.target.value); });
  setInterval(renderWorkers, 1000);

  const stream = new EventSource(api + '/events');
  stream.addEventListener('update', (e) => {
    const u = JSON.parse(e.data);
    u.events.forEach(addEvent);
    applyRun(u.run);
  });
  window.addEventListener('pagehide', () => stream.close());
})();
