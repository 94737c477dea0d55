// browser.cjs drives taskloom ui in chromium with playwright-core for
// TestBrowser. It reads its inputs from the environment, launches the
// browser, prints "ready" and reads the live run's ID from stdin (so that
// the run starts once the browser can watch it), then prints one JSON
// object of measurements on stdout. It exits non-zero with the reason on
// stderr when the page does not do what it should.
'use strict';

const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(name + ' is not set');
  return v;
};
const url = env('UI_URL');
const origin = new URL(url).origin;
const liveTasks = env('LIVE_TASKS').split(',');
const reviewRun = env('REVIEW_RUN');
const reviewTasks = env('REVIEW_TASKS').split(',');
const note = env('REVIEW_NOTE');
const shots = env('SCREENSHOT_DIR');

function check(ok, msg) {
  if (!ok) throw new Error(msg);
}

// statuses returns each node's status and its box's fill colour.
async function statuses(page) {
  return page.$$eval('#graph .node', (gs) => gs.map((g) => ({
    id: g.dataset.task, status: g.dataset.status, label: g.getAttribute('aria-label'),
    fill: getComputedStyle(g.querySelector('rect')).fill,
  })));
}

async function checkNodes(page, ids) {
  const nodes = await statuses(page);
  for (const id of ids) {
    const n = nodes.find((x) => x.id === id);
    check(n, 'no node for task ' + id + ' (nodes: ' + nodes.map((x) => x.id).join(', ') + ')');
    check(n.label.startsWith(id + ':') && n.label.includes('status ' + n.status.replace(/_/g, ' ')),
      'task ' + id + ': accessible label ' + JSON.stringify(n.label) + ' lacks its ID or status');
  }
  // A status is told apart by colour as well as by text.
  const fillOf = {};
  for (const n of nodes) {
    check(!fillOf[n.status] || fillOf[n.status] === n.fill, 'status ' + n.status + ' has two colours');
    fillOf[n.status] = n.fill;
  }
  const fills = new Set(Object.values(fillOf));
  check(fills.size === Object.keys(fillOf).length, 'two statuses share a colour: ' + JSON.stringify(fillOf));
  return nodes;
}

// readLine reads one line from stdin.
function readLine() {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (chunk) => {
      buf += chunk;
      const i = buf.indexOf('\n');
      if (i >= 0) {
        process.stdin.off('data', onData);
        process.stdin.pause();
        resolve(buf.slice(0, i).trim());
      }
    };
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', onData);
    process.stdin.once('end', () => reject(new Error('stdin ended before the live run\'s ID')));
  });
}

(async () => {
  const browser = await chromium.launch({ executablePath: env('CHROMIUM'), args: ['--no-sandbox'] });
  const out = {};
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    process.stdout.write('ready\n');
    const liveRun = await readLine();
    const errors = [];
    const external = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('request', (r) => { if (!r.url().startsWith(origin + '/') && !r.url().startsWith('data:')) external.push(r.url()); });
    page.on('requestfailed', (r) => { if (!r.url().endsWith('/events')) errors.push('request failed: ' + r.url()); });

    // The live run: every task a node, and a status change without reload.
    const start = Date.now();
    await page.goto(origin + '/runs/' + liveRun, { waitUntil: 'load' });
    out.load_ms = Date.now() - start;
    const timing = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const res = performance.getEntriesByType('resource').filter((r) => !r.name.endsWith('/events'));
      return {
        load_event_ms: Math.round(nav.loadEventEnd - nav.startTime),
        html_bytes: nav.decodedBodySize,
        assets: res.map((r) => ({ name: new URL(r.name).pathname, bytes: r.decodedBodySize })),
      };
    });
    Object.assign(out, timing);
    out.page_bytes = timing.html_bytes + timing.assets.filter((a) => /\.(js|css)$/.test(a.name)).reduce((s, a) => s + a.bytes, 0);
    await page.evaluate(() => { window.__notReloaded = true; });
    await page.waitForFunction((ids) => ids.every((id) => document.getElementById('node-' + id)), liveTasks, { timeout: 30000 });
    const before = await checkNodes(page, liveTasks);
    const seen = Object.fromEntries(before.map((n) => [n.id, n.status]));
    await page.waitForFunction((was) => Array.from(document.querySelectorAll('#graph .node'))
      .some((g) => was[g.dataset.task] !== undefined && g.dataset.status !== was[g.dataset.task]), seen, { timeout: 60000 })
      .catch(async (err) => {
        const now = await statuses(page);
        const events = await page.$$eval('#events li', (lis) => lis.map((li) => li.textContent));
        throw new Error('no status change without reload: statuses were ' + JSON.stringify(seen) + ', are ' +
          JSON.stringify(now.map((n) => n.id + ' ' + n.status)) + '; events: ' + JSON.stringify(events) + '; ' + err.message);
      });
    check(await page.evaluate(() => window.__notReloaded === true), 'the page reloaded to show a status change');
    const after = await statuses(page);
    out.live_change = after.filter((n) => seen[n.id] !== n.status).map((n) => n.id + ': ' + seen[n.id] + ' -> ' + n.status);
    await page.waitForSelector('#events li', { timeout: 30000 });
    out.live_events = await page.$$eval('#events li', (lis) => lis.map((li) => li.textContent).slice(0, 5));
    await page.screenshot({ path: shots + '/ui-live-run.png', fullPage: true });

    // The paused run: review its escalated task from the page.
    await page.goto(origin + '/runs/' + reviewRun, { waitUntil: 'load' });
    const nodes = await checkNodes(page, reviewTasks);
    out.review_statuses = Object.fromEntries(nodes.map((n) => [n.id, n.status]));
    const escalated = nodes.find((n) => n.status === 'escalated');
    check(escalated, 'no escalated task on the page: ' + JSON.stringify(out.review_statuses));
    await page.click('#node-' + escalated.id);
    await page.waitForSelector('#detail:not([hidden]) pre.diff', { timeout: 10000 });
    const diff = await page.textContent('#detail pre.diff');
    check(diff.includes('+bad notes'), 'the diff is not shown: ' + diff);
    const tests = await page.textContent('#detail pre.tests');
    check(tests.includes('bad notes'), 'the test output is not shown: ' + tests);
    await page.fill('#review-note', note);
    await page.click('button[data-action="retry"]');
    await page.waitForSelector('#review-recorded', { timeout: 10000 });
    out.recorded = await page.textContent('#review-recorded');
    check(out.recorded.includes('retry') && out.recorded.includes('taskloom resume ' + reviewRun), 'unexpected review notice: ' + out.recorded);
    await page.waitForSelector('#resume-box:not([hidden])', { timeout: 10000 });
    await page.screenshot({ path: shots + '/ui-review.png', fullPage: true });

    check(external.length === 0, 'requests outside the server: ' + external.join(', '));
    check(errors.length === 0, 'console errors: ' + errors.join(' | '));
    out.screenshots = [shots + '/ui-live-run.png', shots + '/ui-review.png'];
    process.stdout.write(JSON.stringify(out) + '\n');
  } finally {
    await browser.close();
  }
})().then(() => process.exit(0), (err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
