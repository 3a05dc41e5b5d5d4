// Crash-recovery torture: runs a mixed workload against the real forkpoint binary, kills it with
// SIGKILL, restarts it on the same state dir, and checks after every restart that nothing
// acknowledged was lost.
//
// How it tries to break things:
//   - a raw client that pipelines: one write carries creates, gets, answers, cancels and upload
//     write+commit pairs, so kills land between a record's append and its group commit;
//   - kill points: random timers; the instant the n-th acknowledgement is read; file system
//     events in the state dir (tests/helpers/killwatch: a compaction's or roll's temp segment
//     created or written, a segment renamed into place or deleted, a blob or a torn-tail side
//     file created, a segment opened by start-up replay, an upload's chunk staged or its file
//     published by the commit, a job's script or its forkpoint-job call starting); timers
//     right after start, during recovery; and now and then a clean shutdown;
//   - small journal segments and a low compaction threshold, so rolls and compactions happen;
//   - jobs (tests/helpers/sidefx.sh) that log every side effect outside the state dir;
//   - three tools keep finished tasks 2 s, so start-up expires tasks while it is crashed into.
// Invariants after every restart:
//   - every task id ever returned still answers (never unknown_task);
//   - a task seen terminal stays terminal with the same status and result (no double completion);
//     it expires only if its tool's TTL says so, never before its expiresAt, and never comes back;
//   - an acknowledged cancel is final; an acknowledged answer is never asked for again;
//   - a report task seen at "Section n" resumes from a checkpoint >= n-1;
//   - an upload's acknowledged cursor never moves back; an acknowledged commit stays completed
//     with the same sha256 and the file's bytes; a commit retried after a crash is idempotent;
//   - no attempt that started after a checkpoint was acknowledged runs a step at or before it
//     again, and no job keeps running long after its supervisor was killed;
//   - after each kill, fsck finds nothing but what start-up repairs; after a clean shutdown,
//     nothing at all.
//   - within the first 100 lives, the journal was compacted and file system kill points fired.
// Usage: node tests/crash/crash.mjs [--kills N] [--seed S] [--legacy-restore] [--no-pipelined-commit]
//   (BUILD=build by default; --legacy-restore runs the jobs with the old `restore || step=0`
//   idiom, to show what the side-effect check catches; --no-pipelined-commit sends an upload's
//   commit only after its writes were answered, to tell other defects apart from commit ordering.)
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const KILLS = parseInt(opt('--kills', process.env.KILLS || '200'), 10);
let seed = parseInt(opt('--seed', process.env.SEED || String(Date.now() % 1000000)), 10);
const IDIOM = args.includes('--legacy-restore') ? 'legacy' : 'exact';
const PIPE_COMMIT = !args.includes('--no-pipelined-commit');
const BUILD = process.env.BUILD || 'build';
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BIN = path.join(ROOT, BUILD, 'forkpoint');
const REPORT = path.join(ROOT, BUILD, 'examples', 'report-generator');
const PLAIN = path.join(ROOT, BUILD, 'examples', 'plain-count');
const KILLWATCH = path.join(ROOT, BUILD, 'tests', 'helpers', 'killwatch');
const JOBHELPER = path.join(ROOT, BUILD, 'forkpoint-job');
const SIDEFX = path.join(ROOT, 'tests', 'helpers', 'sidefx.sh');
const GRACE_MS = 1500;     // a job whose supervisor died must have stopped writing by then
const CHUNK = 16384;       // upload chunk
// Three tools keep finished tasks this long: start-up expires them, so the live state stays small
// enough for frequent compactions, and expiry itself is crashed into.
const SHORT_TTL_S = 2;

function rand() { // xorshift32: a failing run can be replayed with --seed
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');
const origSeed = seed;

for (const f of [BIN, REPORT, PLAIN, KILLWATCH])
  if (!fs.existsSync(f)) { console.error(`crash test: ${f} missing (make all tests)`); process.exit(1); }

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fp-crash-'));
const stateDir = path.join(tmp, 'state');
const sideDir = path.join(tmp, 'side');     // side-effect logs: outside the state dir
const filesDir = path.join(tmp, 'files');   // the upload root
fs.mkdirSync(sideDir);
fs.mkdirSync(filesDir);
const reportSchema = {
  type: 'object',
  properties: { topic: { type: 'string' }, sections: { type: 'integer', default: 5 },
    delayMs: { type: 'integer', default: 150 }, ask: { type: 'boolean', default: false } },
  required: ['topic'],
};
const stepsSchema = {
  type: 'object',
  properties: { steps: { type: 'integer' }, delayMs: { type: 'integer' }, pad: { type: 'integer' },
    preMs: { type: 'integer' } },
  required: ['steps', 'delayMs', 'pad', 'preMs'],
};
const sidefx = (name, profile) => ({
  name, inputSchema: stepsSchema, resume: 'checkpoint',
  command: ['/bin/bash', SIDEFX, sideDir, '{steps}', '{delayMs}', '{pad}', IDIOM, '{preMs}'],
  sandbox: { profile, writePaths: [sideDir], readPaths: [path.join(ROOT, 'tests', 'helpers')] },
});
const config = {
  server: { name: 'crash', maxConcurrent: 4, cancelGraceSeconds: 1, fileRoots: [filesDir],
    journalSegmentBytes: 8192, compactMinBytes: 65536 },
  tools: [
    { name: 'report', inputSchema: reportSchema, command: [REPORT], resume: 'checkpoint' },
    { name: 'report-restart', inputSchema: reportSchema, command: [REPORT], resume: 'restart', ttlSeconds: SHORT_TTL_S },
    { name: 'report-fail', inputSchema: reportSchema, command: [REPORT], resume: 'fail', ttlSeconds: SHORT_TTL_S },
    { name: 'plain', inputSchema: { type: 'object', properties: { n: { type: 'integer', default: 3 } } },
      command: [PLAIN, '{n}'], ttlSeconds: SHORT_TTL_S },
    sidefx('steps', 'default'),
    sidefx('steps-none', 'none'),
  ],
};
fs.writeFileSync(path.join(tmp, 'config.json'), JSON.stringify(config));

let lifeNo = 0;
function fail(msg) {
  for (const u of uploads) if (msg.startsWith(`upload ${u.n}:`)) msg += `\nits answers, oldest first:\n  ${u.hist.join('\n  ')}`;
  console.error(`crash test FAILED (seed ${origSeed}${IDIOM === 'legacy' ? ', --legacy-restore' : ''}` +
    `${PIPE_COMMIT ? '' : ', --no-pipelined-commit'}): ${msg}`);
  if (serverNotes.length) console.error(`recent server log lines about the journal and transfers:\n  ${serverNotes.join('\n  ')}`);
  console.error(`state dir kept at ${stateDir}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}

// ---- one supervisor life ---------------------------------------------------------------------

// A promise-carrying answer: the kind of response a kill "the instant it was read" aims at.
function isAck(m) {
  const s = m.result && m.result.structuredContent;
  if (!s) return false;
  return Boolean((s.taskId && s.status === 'working' && /^Checkpointed /.test(s.progress?.message || '')) ||
    s.accepted || s.status === 'cancelled' || (s.taskId && !s.progress && s.status === 'working') ||
    s.received !== undefined || (s.handle && s.status === 'completed'));
}

class Server {
  // killAfterAcks: SIGKILL right after the n-th acknowledgement is read (0: never).
  constructor({ killAfterAcks = 0 } = {}) {
    this.proc = spawn(BIN, ['mcp', '--config', path.join(tmp, 'config.json'), '--state', stateDir,
      '--log-level', 'info'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.buf = '';
    this.waiters = new Map();
    this.nextId = 1;
    this.stderr = '';
    this.acksLeft = killAfterAcks;
    this.killedAt = 0;
    this.exited = new Promise((res) => this.proc.on('exit', (code, sig) => res({ code, sig })));
    this.exited.then(() => { for (const w of this.waiters.values()) w(null); this.waiters.clear(); });
    this.proc.stdout.on('data', (d) => this.onData(d));
    this.proc.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-20000);
      compactions += (String(d).match(/journal compacted/g) || []).length;
      for (const l of String(d).split('\n'))
        if (/transfer|journal|snapshot|segment/.test(l)) { serverNotes.push(`[life ${lifeNo}] ${l}`); if (serverNotes.length > 60) serverNotes.shift(); }
    });
    this.proc.stdin.on('error', () => {});
  }
  onData(d) {
    this.buf += d;
    let i;
    while ((i = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      let m;
      try { m = JSON.parse(line); } catch { fail(`non-JSON line on stdout: ${line.slice(0, 200)}`); }
      if (m.id !== undefined && this.waiters.has(m.id)) {
        const w = this.waiters.get(m.id);
        this.waiters.delete(m.id);
        w(m);
      }
      if (this.acksLeft > 0 && isAck(m) && --this.acksLeft === 0)
        this.kill();
    }
  }
  // Send every request in one write, without waiting; one promise per answer (null: killed).
  pipeline(reqs) {
    let text = '';
    const ps = reqs.map(([method, params]) => {
      const id = this.nextId++;
      text += JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n';
      return new Promise((resolve) => this.waiters.set(id, resolve));
    });
    if (this.proc.exitCode !== null || this.proc.signalCode !== null)
      for (const w of this.waiters.values()) w(null);
    else
      this.proc.stdin.write(text);
    return ps;
  }
  request(method, params) { return this.pipeline([[method, params]])[0]; }
  async init() {
    const r = await this.request('initialize', { protocolVersion: '2025-11-25', capabilities: {},
      clientInfo: { name: 'crash', version: '1' } });
    if (r === null) return false;
    if (r.error) fail(`initialize failed: ${JSON.stringify(r)}\n${this.stderr}`);
    this.proc.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
    return true;
  }
  async call(name, a) { return unwrap(name, await this.request('tools/call', { name, arguments: a })); }
  calls(list) { return this.pipeline(list.map(([name, a]) => ['tools/call', { name, arguments: a }]))
    .map((p, i) => p.then((r) => unwrap(list[i][0], r))); }
  kill() {
    if (!this.killedAt) { this.killedAt = Date.now(); kills.push(this.killedAt); }
    this.proc.kill('SIGKILL');
    return this.exited;
  }
}

// structuredContent of a tools/call answer; null when the server died first.
function unwrap(name, r) {
  if (!r) return null;
  if (r.error) fail(`${name}: JSON-RPC error ${JSON.stringify(r.error)}`);
  return r.result.structuredContent;
}

// A kill switch on a file system event (tests/helpers/killwatch) for one life.
class Watch {
  constructor([rule, dirs]) {
    this.rule = rule;
    this.fired = null;
    this.proc = spawn(KILLWATCH, [...rule, ...dirs], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.proc.stdin.on('error', () => {});
    let out = '';
    this.ready = new Promise((res) => this.proc.stdout.on('data', (d) => {
      out += d;
      if (out.startsWith('ready\n')) res(true);
      const m = /fired (\S+) (\S+)/.exec(out);
      if (m && !this.fired) {
        this.fired = `${m[1]} ${m[2]}`;
        if (this.srv && !this.srv.killedAt) { this.srv.killedAt = Date.now(); kills.push(this.srv.killedAt); }
      }
    }));
    this.done = new Promise((res) => this.proc.on('exit', res));
  }
  arm(srv) { this.srv = srv; this.proc.stdin.write(`${srv.proc.pid}\n`); }
  async stop() {
    this.proc.stdin.end();
    await this.done;
    if (this.fired) fired.set(this.rule.slice(0, 2).join(' '), (fired.get(this.rule.slice(0, 2).join(' ')) || 0) + 1);
  }
}

// Kill points on file system events: [event, name glob, nth] and the folders to watch.
const STATE_DIRS = () => [path.join(stateDir, 'journal'), path.join(stateDir, 'blobs')];
const FS_RULES = [ // [weight, rule]
  // a roll or a compaction begins; a snapshot being written; a new segment published; segments
  // older than a snapshot removed
  [2, () => [['create', '*.seg.tmp', '1'], STATE_DIRS()]],
  [2, () => [['modify', '*.seg.tmp', String(randInt(1, 3))], STATE_DIRS()]],
  [2, () => [['moved_to', '*.seg', '1'], STATE_DIRS()]],
  [2, () => [['delete', '*.seg', String(randInt(1, 2))], STATE_DIRS()]],
  // a blob being written; a blob published
  [1, () => [['create', '.tmp-*', '1'], STATE_DIRS()]],
  [1, () => [['moved_to', '[0-9a-f]*', '1'], STATE_DIRS()]],
  // start-up: replay opening a segment; a torn tail being cut
  [1, () => [['open', '*.seg', String(randInt(1, 2))], STATE_DIRS()]],
  [1, () => [['create', '*torn*', '1'], STATE_DIRS()]],
  // an upload's commit publishing the file (renamed, or linked, into place); a chunk being
  // staged (next to the destination, or in the state dir)
  [2, () => [['moved_to', 'u*.bin', '1'], [filesDir]]],
  [2, () => [['create', 'u*.bin', '1'], [filesDir]]],
  [1, () => [['modify', '*.part', String(randInt(1, 3))], [filesDir, path.join(stateDir, 'uploads')]]],
  // a job's script starting; one of its forkpoint-job calls starting
  [2, () => [['open', 'sidefx.sh', String(randInt(1, 2))], [path.dirname(SIDEFX)]]],
  [2, () => [['open', 'forkpoint-job', String(randInt(1, 4))], [path.dirname(JOBHELPER)]]],
];
function pickRule() {
  let r = rand() * FS_RULES.reduce((n, [w]) => n + w, 0);
  for (const [w, f] of FS_RULES) if ((r -= w) < 0) return f();
  return FS_RULES[0][1]();
}

// ---- what the driver knows was acknowledged ---------------------------------------------------

const model = new Map(); // id -> {tool, terminal, result, cancelAcked, answered:Set, seen, acks, q}
const uploads = [];       // {n, path, data, sha, handle, acked, committed}
const kills = [];         // times SIGKILL was sent to a supervisor
const lives = [];         // {k, plan, start, end, fired}: how each life went, for failure reports
const fired = new Map();  // kill point -> times it fired
let checks = 0;
let compactions = 0;
const serverNotes = [];   // the servers' recent log lines about transfers and the journal
let ackedOps = 0;

function observe(id, v) {
  const t = model.get(id);
  checks++;
  if (!v) return;
  if (v.status === 'failed' && v.error && v.error.code === 'unknown_task') fail(`task ${id} (${t.tool}) was lost`);
  // Expired: only a short-TTL tool's task, never before its expiresAt (or creation + TTL when
  // its end was never seen), and for good.
  if (v.status === 'failed' && v.error && v.error.code === 'expired' && !v.taskId) {
    const ttl = config.tools.find((x) => x.name === t.tool).ttlSeconds;
    const earliest = t.expiresAt ?? t.createdAt + (ttl ?? 0) * 1000;
    if (!ttl || Date.now() < earliest - 1000)
      fail(`task ${id} (${t.tool}) answers expired ${ttl ? `${earliest - Date.now()} ms before its expiry` : 'but its tool keeps tasks a day'}` +
        ` (it was ${t.terminal || 'not seen finished'})`);
    t.terminal = t.expired = 'expired';
    return;
  }
  if (t.expired) fail(`task ${id} (${t.tool}) had expired, now answers ${JSON.stringify(v).slice(0, 300)}`);
  if (!v.taskId || v.taskId !== id) fail(`get ${id} answered ${JSON.stringify(v).slice(0, 300)}`);
  if (t.terminal) {
    if (v.status !== t.terminal) fail(`task ${id} was ${t.terminal}, now ${v.status}`);
    const r = JSON.stringify(v.result ?? null);
    if (r !== t.result) fail(`task ${id} completed twice with different results`);
    return;
  }
  if (t.cancelAcked && v.status !== 'cancelled') fail(`task ${id}: cancel was acknowledged but status is ${v.status}`);
  t.q = v.status === 'input_required' ? v.inputRequest.questionId : null;
  if (t.q && t.answered.has(t.q))
    fail(`task ${id}: question ${t.q} asked again after it was answered`);
  const msg = (v.progress && v.progress.message) || '';
  // "Section n" while attempt k runs means section n-1 is checkpointed: any later attempt must
  // resume at n-1 or later.
  const m = /^Section (\d+)\//.exec(msg);
  if (m && v.status === 'working') t.seen.push([v.attempt, parseInt(m[1], 10) - 1]);
  const c = /^Checkpointed (\d+)$/.exec(msg);
  // The first time each checkpoint was seen acknowledged (what the side-effect check needs).
  if (c && v.status === 'working' && !t.acks.has(parseInt(c[1], 10))) { t.acks.set(parseInt(c[1], 10), Date.now()); ackedOps++; }
  if (['completed', 'failed', 'cancelled'].includes(v.status)) {
    t.terminal = v.status;
    t.result = JSON.stringify(v.result ?? null);
    t.expiresAt = Date.parse(v.expiresAt);
    ackedOps++;
    const need = Math.max(0, ...t.seen.filter(([a]) => a < v.attempt).map(([, n]) => n));
    if (v.status === 'completed' && t.tool === 'report' && v.result.resumedFrom < need)
      fail(`task ${id} resumed from section ${v.result.resumedFrom} in attempt ${v.attempt}, but a checkpoint at ${need} had been acknowledged before`);
    if (v.status === 'completed' && t.tool.startsWith('report') && v.result.sections !== t.sections)
      fail(`task ${id}: wrong result ${t.result.slice(0, 200)}`);
    if (t.tool.startsWith('steps') && v.status === 'failed' && !t.cancelAcked)
      fail(`task ${id} (${t.tool}, a job that never fails by itself) failed: ${JSON.stringify(v.error).slice(0, 400)}` +
        (IDIOM === 'exact' && /status 1\b/.test(v.error?.message || '') ?
          ' (does `forkpoint-job restore` exit 4 when there is no checkpoint?)' : ''));
    if (v.status === 'completed' && t.tool.startsWith('steps') && v.result.steps !== t.sections)
      fail(`task ${id}: wrong result ${t.result.slice(0, 200)}`);
  }
}

function newTaskArgs(tool) {
  if (tool === 'plain') return { n: randInt(1, 5) };
  if (tool.startsWith('steps')) return { steps: randInt(6, 12), delayMs: randInt(80, 200), pad: pick([8, 900, 1500]),
    preMs: pick([0, randInt(1, 250)]) };
  return { topic: `t${model.size}`, sections: randInt(2, 6), delayMs: randInt(40, 160), ask: rand() < 0.3 };
}

function created(tool, a, v) {
  if (v === null) return;
  if (!v || !/^[0-9a-f]{32}$/.test(v.taskId)) fail(`bad handle ${JSON.stringify(v)}`);
  ackedOps++;
  model.set(v.taskId, { tool, sections: a.sections ?? a.steps, createdAt: Date.now(), terminal: null, result: null, cancelAcked: false,
    answered: new Set(), seen: [], acks: new Map(), q: null });
}

function errCode(v) { return v && v.error && v.error.code; }

// An upload's answers.  Every check here is about acknowledged state only.
function observeUpload(u, kind, v) {
  if (v === null) return;
  checks++;
  u.hist.push(`${kind} ${JSON.stringify(v).slice(0, 160)}`);
  if (u.hist.length > 40) u.hist.shift();
  const code = errCode(v);
  if (code === 'unknown_transfer') fail(`upload ${u.n}: acknowledged handle ${u.handle} was lost`);
  if (kind === 'write') {
    if (!code) { u.acked = Math.max(u.acked, v.nextOffset); u.cursor = v.nextOffset; ackedOps++; }
    else if (code === 'offset_mismatch') {
      if (v.error.partial.cursor < u.acked && !u.committed)
        fail(`upload ${u.n}: cursor moved back from an acknowledged ${u.acked} to ${v.error.partial.cursor}`);
      u.cursor = v.error.partial.cursor;
    } else if (code !== 'not_active') fail(`upload ${u.n}: write answered ${JSON.stringify(v).slice(0, 300)}`);
  } else if (kind === 'commit') {
    if (!code) {
      if (v.status !== 'completed' || v.sha256 !== u.sha) fail(`upload ${u.n}: commit answered ${JSON.stringify(v)}`);
      u.committed = true;
      ackedOps++;
    } else if (code === 'size_mismatch') {
      if (v.error.partial.cursor < u.acked) fail(`upload ${u.n}: commit says cursor ${v.error.partial.cursor} < acknowledged ${u.acked}`);
      u.cursor = v.error.partial.cursor;
    } else if (code === 'file_exists') {
      fail(`upload ${u.n}: commit answers file_exists for its own destination (acknowledged cursor ${u.acked} of ${u.data.length}, ` +
        `file on disk ${fs.existsSync(u.path) ? `${fs.statSync(u.path).size} bytes, sha256 ${sha256(fs.readFileSync(u.path)) === u.sha ? 'matches' : 'differs'}` : 'missing'})`);
    } else if (u.committed || code !== 'not_active') fail(`upload ${u.n}: commit answered ${JSON.stringify(v).slice(0, 300)}`);
  } else if (kind === 'status') {
    if (code) fail(`upload ${u.n}: status answered ${JSON.stringify(v).slice(0, 300)}`);
    if (u.committed && (v.status !== 'completed' || v.sha256 !== u.sha))
      fail(`upload ${u.n}: commit was acknowledged, now ${JSON.stringify(v)}`);
    if (v.status === 'active' && v.nextOffset < u.acked)
      fail(`upload ${u.n}: cursor moved back from an acknowledged ${u.acked} to ${v.nextOffset}`);
    if (v.status === 'completed') {
      const disk = fs.existsSync(u.path) ? fs.readFileSync(u.path) : null;
      if (!disk || sha256(disk) !== u.sha) fail(`upload ${u.n}: completed, but the file is ${disk ? 'different' : 'missing'}`);
    }
    if (v.status === 'failed') fail(`upload ${u.n} failed: ${JSON.stringify(v).slice(0, 300)}`);
    u.cursor = v.nextOffset;
    u.status = v.status;
  }
}

// ---- the workload -----------------------------------------------------------------------------

// One pipelined burst: creates, gets of live tasks, answers to the questions last seen, a cancel,
// and the next chunks of an upload with its commit, all in one write.
async function burst(srv) {
  const reqs = [];
  const after = [];
  const live = [...model.entries()].filter(([, t]) => !t.terminal);
  const ncreate = live.length < 8 ? randInt(0, 3) : 0;
  for (let i = 0; i < ncreate; i++) {
    const tool = pick(['report', 'report-restart', 'report-fail', 'plain', 'steps', 'steps', 'steps-none']);
    const a = newTaskArgs(tool);
    reqs.push([tool, a]);
    after.push((v) => created(tool, a, v));
  }
  for (const [id, t] of live) {
    if (t.q && !t.cancelAcked && rand() < 0.8) {
      const q = t.q;
      reqs.push(['durable_task_respond', { taskId: id, response: pick(['yes', 'no']) }]);
      after.push((v) => { if (v && v.accepted) { t.answered.add(q); ackedOps++; } });
    }
    reqs.push(['durable_task_get', { taskId: id }]);
    after.push((v) => observe(id, v));
    if (!t.q && rand() < 0.001) {
      reqs.push(['durable_task_cancel', { taskId: id }]);
      after.push((v) => { if (v && v.status === 'cancelled') { t.cancelAcked = true; ackedOps++; } });
      reqs.push(['durable_task_get', { taskId: id }]);
      after.push((v) => observe(id, v));
    }
  }
  uploadReqs(reqs, after);
  const answers = srv.calls(reqs);
  let alive = true;
  for (let i = 0; i < answers.length; i++) {
    const v = await answers[i];
    if (v === null) alive = false;
    after[i](v);
  }
  return alive;
}

// The next step of one unfinished upload: open it (or find it again), or send the chunks from its
// cursor with the commit right behind them, without waiting.
function uploadReqs(reqs, after) {
  let u = uploads.find((x) => !x.committed && rand() < 0.5);
  if (!u && uploads.every((x) => x.committed) && rand() < 0.06) {
    const data = crypto.randomBytes(CHUNK * randInt(2, 5) + randInt(0, 999));
    u = { n: uploads.length, path: path.join(filesDir, `u${uploads.length}.bin`), data, sha: sha256(data),
      handle: null, acked: 0, cursor: 0, committed: false, hist: [] };
    uploads.push(u);
  }
  if (!u) return;
  if (!u.handle) {
    reqs.push(['file_transfer_open', { direction: 'upload', path: u.path, size: u.data.length, sha256: u.sha }]);
    after.push((v) => {
      if (v === null) return;
      if (errCode(v)) fail(`upload ${u.n}: open answered ${JSON.stringify(v).slice(0, 300)}`);
      if (u.handle && v.handle !== u.handle) fail(`upload ${u.n}: open again gave a new handle`);
      u.handle = v.handle;
      u.cursor = v.nextOffset;
      ackedOps++;
    });
    return;
  }
  const n = u.cursor >= u.data.length ? 0 : randInt(1, 3);
  for (let i = 0, off = u.cursor; i < n && off < u.data.length; i++, off += CHUNK) {
    reqs.push(['file_transfer_write', { handle: u.handle, offset: off,
      data: u.data.subarray(off, off + CHUNK).toString('base64') }]);
    after.push((v) => observeUpload(u, 'write', v));
  }
  if (u.cursor + n * CHUNK >= u.data.length && (PIPE_COMMIT || u.cursor >= u.data.length)) {
    reqs.push(['file_transfer_commit', { handle: u.handle }]);
    after.push((v) => observeUpload(u, 'commit', v));
  }
}

// Sequential calls, as the original torture did: a get, then an answer or a cancel.
async function step(srv) {
  const live = [...model.entries()].filter(([, t]) => !t.terminal);
  if (live.length < 2 || (rand() < 0.15 && live.length < 6)) {
    const tool = pick(['report', 'report', 'report-restart', 'report-fail', 'plain', 'steps']);
    const a = newTaskArgs(tool);
    const v = await srv.call(tool, a);
    created(tool, a, v);
    return v !== null;
  }
  await new Promise((res) => setTimeout(res, 5));
  const [id, t] = pick(live);
  const v = await srv.call('durable_task_get', { taskId: id });
  if (v === null) return false;
  observe(id, v);
  if (v.status === 'input_required') {
    const q = v.inputRequest.questionId;
    const a = await srv.call('durable_task_respond', { taskId: id, response: pick(['yes', 'no']) });
    if (a === null) return false;
    if (a.accepted) { t.answered.add(q); ackedOps++; }
  } else if (v.status === 'working' && rand() < 0.005) {
    const c = await srv.call('durable_task_cancel', { taskId: id });
    if (c === null) return false;
    if (c.status === 'cancelled') { t.cancelAcked = true; ackedOps++; }
  }
  return true;
}

async function workload(srv, deadline) {
  while (Date.now() < deadline) {
    const ok = rand() < 0.5 ? await burst(srv) : await step(srv);
    if (!ok) return;
  }
}

// Every task and upload after a restart, all in one pipelined write.
async function checkAll(srv, sampleTerminal) {
  const reqs = [];
  const after = [];
  for (const [id, t] of model) {
    if (t.terminal && rand() > sampleTerminal) continue;
    reqs.push(['durable_task_get', { taskId: id }]);
    after.push((v) => observe(id, v));
  }
  for (const u of uploads) {
    if (!u.handle || (u.committed && rand() > sampleTerminal)) continue;
    reqs.push(['file_transfer_status', { handle: u.handle }]);
    after.push((v) => observeUpload(u, 'status', v));
  }
  const answers = srv.calls(reqs);
  let alive = true;
  for (let i = 0; i < answers.length; i++) {
    const v = await answers[i];
    if (v === null) alive = false;
    after[i](v);
  }
  return alive;
}

// ---- checks outside the protocol --------------------------------------------------------------

// After a kill: fsck may find only what start-up repairs; after a clean shutdown, nothing.
function fsck(clean) {
  const r = spawnSync(BIN, ['fsck', '--state', stateDir], { encoding: 'utf8' });
  const out = `${r.stdout}${r.stderr}`.trim();
  if (r.status === 0) return;
  if (!clean && r.status === 1 && /torn tail|no complete header|snapshot without its end record/.test(out)) return;
  fail(`fsck after a ${clean ? 'clean shutdown' : 'kill'} (exit ${r.status}): ${out.slice(0, 600)}`);
}

// The lives around time `at` (ms), for a failure message.
function livesAround(at) {
  return lives.filter((l) => l.end >= at - 2000 && l.start <= at + 500)
    .map((l) => `life ${l.k} ${l.plan}: ${(l.start - at).toFixed(1)} .. ${(l.end - at).toFixed(1)} ms${l.fired ? `, fired on ${l.fired}` : ''}`)
    .join('\n  ');
}

// The side-effect logs: no attempt that started after a checkpoint was acknowledged re-runs a
// step it covers; no job writes long after its supervisor was killed.
function checkSideEffects() {
  let lines = 0;
  for (const [id, t] of model) {
    if (!t.tool.startsWith('steps')) continue;
    const file = path.join(sideDir, `${id}.log`);
    if (!fs.existsSync(file)) continue;
    const toks = new Map();
    const text = fs.readFileSync(file, 'utf8');
    for (const l of text.slice(0, text.lastIndexOf('\n') + 1).split('\n')) {
      if (!l) continue;
      lines++;
      const [ms, tok, ev, st] = l.split(' ');
      const time = parseInt(ms, 10) / 1000;
      if (!toks.has(tok)) toks.set(tok, { first: time, last: time, resume: null, begins: [] });
      const k = toks.get(tok);
      k.last = Math.max(k.last, time);
      if (ev === 'resume') { k.resume = time; k.from = parseInt(st, 10); }
      if (ev === 'begin') k.begins.push([time, parseInt(st, 10)]);
    }
    for (const [tok, k] of toks) {
      if (k.resume !== null)
        for (const [s, ackAt] of t.acks) {
          const rerun = k.begins.find(([, b]) => b <= s);
          if (k.resume > ackAt && rerun)
            fail(`task ${id} (${t.tool}): attempt ${tok} started ${(k.resume - ackAt).toFixed(1)} ms after checkpoint ${s} was ` +
              `acknowledged and ran step ${rerun[1]} again (a side effect repeated)\n${fs.readFileSync(file, 'utf8')}` +
              `lives around the attempt's start (times relative to it):\n  ${livesAround(k.first)}`);
          if (k.resume > ackAt && k.from < s)
            fail(`task ${id} (${t.tool}): attempt ${tok} started ${(k.resume - ackAt).toFixed(1)} ms after checkpoint ${s} was ` +
              `acknowledged, but resumed from ${k.from}\n${fs.readFileSync(file, 'utf8')}`);
        }
      for (const K of kills)
        if (k.first < K && k.last > K + GRACE_MS)
          fail(`task ${id} (${t.tool}): attempt ${tok} was still writing ${k.last - K} ms after its supervisor was ` +
            `killed\n${fs.readFileSync(file, 'utf8')}`);
    }
  }
  return lines;
}

// ---- the run ----------------------------------------------------------------------------------

// How one life ends.  Kill points other than timers fall back to a timer if they never fire.
function planLife(k) {
  const r = rand();
  if (k === 0) return { kind: 'timer' };
  if (r < 0.25) return { kind: 'timer' };
  if (r < 0.45) return { kind: 'ack', n: randInt(1, 12) };
  if (r < 0.85) return { kind: 'fs', rule: pickRule() };
  if (r < 0.95) return { kind: 'startup', ms: randInt(0, 25) };
  return { kind: 'clean' };
}

async function life(k) {
  const plan = planLife(k);
  lifeNo = k;
  for (const u of uploads) if (!u.committed) u.hist.push(`-- life ${k}: ${JSON.stringify(plan)}`);
  let watch = null;
  if (plan.kind === 'fs') {
    watch = new Watch(plan.rule);
    await watch.ready;
  }
  const srv = new Server({ killAfterAcks: plan.kind === 'ack' ? plan.n : 0 });
  const rec = { k, plan: JSON.stringify(plan), start: Date.now(), end: 0, fired: null };
  lives.push(rec);
  if (watch) watch.arm(srv);
  if (plan.kind === 'startup') setTimeout(() => srv.kill(), plan.ms);
  const up = await srv.init();
  if (up && (await checkAll(srv, 0.05))) {
    const end = Date.now() + (plan.kind === 'fs' ? randInt(300, 1000) : randInt(10, 400));
    const timer = plan.kind === 'clean' ? null : setTimeout(() => srv.kill(), end - Date.now());
    await workload(srv, plan.kind === 'clean' ? end : end + 2000);
    clearTimeout(timer);
  }
  let ex;
  if (plan.kind === 'clean' && !srv.killedAt) {
    srv.proc.stdin.end();
    ex = await srv.exited;
    if (ex.code !== 0) fail(`clean shutdown exited ${JSON.stringify(ex)}\n${srv.stderr}`);
  } else {
    ex = await srv.kill();
  }
  if (watch) await watch.stop();
  rec.end = srv.killedAt || Date.now();
  rec.fired = watch && watch.fired;
  if (ex.sig !== 'SIGKILL' && ex.code !== 0) fail(`server exited by itself: ${JSON.stringify(ex)}\n${srv.stderr}`);
  fsck(plan.kind === 'clean' && ex.code === 0);
  if (k % 25 === 24) checkSideEffects();
}

// After 100 lives: file system kill points must have fired (else killwatch is not working
// here), and the journal must have been compacted (compactMinBytes is 64 KiB and every life
// appends several KiB).
function checkCoverage(n) {
  if (fired.size === 0) fail(`no file system kill point fired in ${n} lives (inotify unavailable?)`);
  if (compactions > 0) return;
  const jdir = path.join(stateDir, 'journal');
  const segs = fs.readdirSync(jdir).filter((f) => f.endsWith('.seg'));
  const bytes = segs.reduce((m, f) => m + fs.statSync(path.join(jdir, f)).size, 0);
  fail(`the journal was never compacted in ${n} lives (${segs.length} segments, ${bytes} bytes, compactMinBytes ` +
    `${config.server.compactMinBytes})`);
}

// The end: let everything finish (answering questions, completing uploads) and check it all.
async function finish() {
  const srv = new Server();
  if (!(await srv.init())) fail('server died at the final start');
  const deadline = Date.now() + 120000;
  for (;;) {
    if (!(await checkAll(srv, 1.0))) fail(`server died during the final checks\n${srv.stderr}`);
    let open = 0;
    const reqs = [];
    const after = [];
    for (const [id, t] of model) {
      if (t.terminal) continue;
      open++;
      if (t.q) {
        const q = t.q;
        reqs.push(['durable_task_respond', { taskId: id, response: 'yes' }]);
        after.push((v) => { if (v && v.accepted) t.answered.add(q); });
      }
    }
    for (const u of uploads) {
      if (u.committed) continue;
      open++;
      if (!u.handle || rand() < 0.5) uploadReqs(reqs, after);
      else {
        reqs.push(['file_transfer_commit', { handle: u.handle }]);
        after.push((v) => observeUpload(u, 'commit', v));
      }
    }
    if (!open) break;
    const answers = srv.calls(reqs);
    for (let i = 0; i < answers.length; i++) after[i](await answers[i]);
    if (Date.now() > deadline) fail(`${open} tasks or uploads never finished`);
    await new Promise((r) => setTimeout(r, 100));
  }
  srv.proc.stdin.end();
  const ex = await srv.exited;
  if (ex.code !== 0) fail(`final shutdown exited ${JSON.stringify(ex)}\n${srv.stderr}`);
  fsck(true);
}

const t0 = Date.now();
for (let k = 0; k < KILLS; k++) {
  await life(k);
  if (k === 99) checkCoverage(k + 1);
}
await finish();
const sidefxLines = checkSideEffects();
const counts = {};
for (const t of model.values()) {
  const k = `${t.tool}:${t.terminal}${t.terminal === 'cancelled' && !t.cancelAcked ? '(unasked)' : ''}`;
  counts[k] = (counts[k] || 0) + 1;
}
const segs = fs.readdirSync(path.join(stateDir, 'journal')).filter((f) => f.endsWith('.seg'));
const jbytes = segs.reduce((n, f) => n + fs.statSync(path.join(stateDir, 'journal', f)).size, 0);
console.log(`crash test: ${KILLS} lives, ${kills.length} SIGKILLs, ${model.size} tasks, ${uploads.length} uploads, ` +
  `${ackedOps} acknowledged operations, ${checks} checks, ${sidefxLines} side-effect lines, seed ${origSeed}, ` +
  `${((Date.now() - t0) / 1000).toFixed(1)} s`);
console.log(`kill points fired: ${JSON.stringify(Object.fromEntries(fired))}; ${compactions} compaction(s), ` +
  `${segs.length} segment(s) of ${jbytes} bytes at the end`);
console.log(JSON.stringify(counts));
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`${KILLS} passed, 0 failed`);
