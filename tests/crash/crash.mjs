// Crash-recovery torture: runs a mixed workload against the real forkpoint binary, kills it with
// SIGKILL at random points, restarts it on the same state dir, and checks after every restart
// that nothing acknowledged was lost:
//   - every task id ever returned still answers (never unknown_task);
//   - a task seen terminal stays terminal with the same status and result (no double completion);
//   - an acknowledged cancel is final; an acknowledged answer is never asked for again;
//   - a report task that was seen at "Section n" resumes from a checkpoint >= n-1.
// Usage: node tests/crash/crash.mjs [--kills N] [--seed S]   (BUILD=build by default)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const KILLS = parseInt(opt('--kills', process.env.KILLS || '200'), 10);
let seed = parseInt(opt('--seed', process.env.SEED || String(Date.now() % 1000000)), 10);
const BUILD = process.env.BUILD || 'build';
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BIN = path.join(ROOT, BUILD, 'forkpoint');
const REPORT = path.join(ROOT, BUILD, 'examples', 'report-generator');
const PLAIN = path.join(ROOT, BUILD, 'examples', 'plain-count');

function rand() { // xorshift32: a failing run can be replayed with --seed
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fp-crash-'));
const stateDir = path.join(tmp, 'state');
const reportSchema = {
  type: 'object',
  properties: { topic: { type: 'string' }, sections: { type: 'integer', default: 5 },
    delayMs: { type: 'integer', default: 150 }, ask: { type: 'boolean', default: false } },
  required: ['topic'],
};
const config = {
  server: { name: 'crash', maxConcurrent: 3, cancelGraceSeconds: 1 },
  tools: [
    { name: 'report', inputSchema: reportSchema, command: [REPORT], resume: 'checkpoint' },
    { name: 'report-restart', inputSchema: reportSchema, command: [REPORT], resume: 'restart' },
    { name: 'report-fail', inputSchema: reportSchema, command: [REPORT], resume: 'fail' },
    { name: 'plain', inputSchema: { type: 'object', properties: { n: { type: 'integer', default: 3 } } },
      command: [PLAIN, '{n}'] },
  ],
};
fs.writeFileSync(path.join(tmp, 'config.json'), JSON.stringify(config));

class Server {
  constructor() {
    this.proc = spawn(BIN, ['mcp', '--config', path.join(tmp, 'config.json'), '--state', stateDir,
      '--log-level', 'warning'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.buf = '';
    this.waiters = new Map();
    this.nextId = 1;
    this.stderr = '';
    this.exited = new Promise((res) => this.proc.on('exit', (code, sig) => res({ code, sig })));
    this.proc.stdout.on('data', (d) => {
      this.buf += d;
      let i;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        let m;
        try { m = JSON.parse(line); } catch { fail(`non-JSON line on stdout: ${line.slice(0, 200)}`); }
        if (m.id !== undefined && this.waiters.has(m.id)) {
          this.waiters.get(m.id)(m);
          this.waiters.delete(m.id);
        }
      }
    });
    this.proc.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-20000); });
    this.proc.stdin.on('error', () => {});
  }
  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiters.set(id, resolve);
      this.exited.then(() => resolve(null)); // killed: no answer, not acknowledged
      this.proc.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }
  async init() {
    const r = await this.request('initialize', { protocolVersion: '2025-11-25', capabilities: {},
      clientInfo: { name: 'crash', version: '1' } });
    if (!r || r.error) fail(`initialize failed: ${JSON.stringify(r)}\n${this.stderr}`);
    this.proc.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  }
  async call(name, args) {
    const r = await this.request('tools/call', { name, arguments: args });
    if (!r) return null;
    if (r.error) fail(`${name}: JSON-RPC error ${JSON.stringify(r.error)}`);
    return r.result.structuredContent;
  }
  kill() { this.proc.kill('SIGKILL'); return this.exited; }
}

function fail(msg) {
  console.error(`crash test FAILED (seed ${origSeed}): ${msg}`);
  console.error(`state dir kept at ${stateDir}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}
const origSeed = seed;

// What the driver knows was acknowledged.
const model = new Map(); // id -> {tool, terminal, result, cancelAcked, answered:Set, seen:[[attempt, section]]}
let checks = 0;

function observe(id, v) {
  const t = model.get(id);
  checks++;
  if (!v) return;
  if (v.status === 'failed' && v.error && v.error.code === 'unknown_task') fail(`task ${id} (${t.tool}) was lost`);
  if (!v.taskId || v.taskId !== id) fail(`get ${id} answered ${JSON.stringify(v).slice(0, 300)}`);
  if (t.terminal) {
    if (v.status !== t.terminal) fail(`task ${id} was ${t.terminal}, now ${v.status}`);
    const r = JSON.stringify(v.result ?? null);
    if (r !== t.result) fail(`task ${id} completed twice with different results`);
    return;
  }
  if (t.cancelAcked && v.status !== 'cancelled') fail(`task ${id}: cancel was acknowledged but status is ${v.status}`);
  if (v.status === 'input_required' && t.answered.has(v.inputRequest.questionId))
    fail(`task ${id}: question ${v.inputRequest.questionId} asked again after it was answered`);
  // "Section n" while attempt k runs means section n-1 is checkpointed: any later attempt must
  // resume at n-1 or later.
  const m = v.progress && /^Section (\d+)\//.exec(v.progress.message || '');
  if (m && v.status === 'working') t.seen.push([v.attempt, parseInt(m[1], 10) - 1]);
  if (['completed', 'failed', 'cancelled'].includes(v.status)) {
    t.terminal = v.status;
    t.result = JSON.stringify(v.result ?? null);
    const need = Math.max(0, ...t.seen.filter(([a]) => a < v.attempt).map(([, n]) => n));
    if (v.status === 'completed' && t.tool === 'report' && v.result.resumedFrom < need)
      fail(`task ${id} resumed from section ${v.result.resumedFrom} in attempt ${v.attempt}, but a checkpoint at ${need} had been acknowledged before`);
    if (v.status === 'completed' && t.tool.startsWith('report') && v.result.sections !== t.sections)
      fail(`task ${id}: wrong result ${t.result.slice(0, 200)}`);
  }
}

async function checkAll(srv, sampleTerminal) {
  for (const [id, t] of model) {
    if (t.terminal && rand() > sampleTerminal) continue;
    const v = await srv.call('durable_task_get', { taskId: id });
    if (v === null) return false;
    observe(id, v);
  }
  return true;
}

async function workload(srv, deadline) {
  while (Date.now() < deadline) {
    const r = rand();
    const nlive = [...model.values()].filter((t) => !t.terminal).length;
    // Keep a handful of tasks alive: enough to crash in every state, few enough to finish.
    if ((r < 0.25 && nlive < 6) || nlive < 2) {
      const tool = pick(['report', 'report', 'report-restart', 'report-fail', 'plain']);
      const a = tool === 'plain' ? { n: 1 + Math.floor(rand() * 5) }
        : { topic: `t${model.size}`, sections: 2 + Math.floor(rand() * 5), delayMs: 40 + Math.floor(rand() * 120), ask: rand() < 0.3 };
      const v = await srv.call(tool, a);
      if (v === null) return;
      if (!/^[0-9a-f]{32}$/.test(v.taskId)) fail(`bad handle ${JSON.stringify(v)}`);
      model.set(v.taskId, { tool, sections: a.sections, terminal: null, result: null, cancelAcked: false,
        answered: new Set(), seen: [] });
      continue;
    }
    const live = [...model.entries()].filter(([, t]) => !t.terminal);
    if (!live.length) continue;
    await new Promise((res) => setTimeout(res, 5));
    const [id, t] = pick(live);
    const v = await srv.call('durable_task_get', { taskId: id });
    if (v === null) return;
    observe(id, v);
    if (v.status === 'input_required') {
      const q = v.inputRequest.questionId;
      const a = await srv.call('durable_task_respond', { taskId: id, response: pick(['yes', 'no']) });
      if (a === null) return;
      if (a.accepted) t.answered.add(q);
    } else if (v.status === 'working' && rand() < 0.03) {
      const c = await srv.call('durable_task_cancel', { taskId: id });
      if (c === null) return;
      if (c.status === 'cancelled') t.cancelAcked = true;
      else if (c.status !== 'cancelled' && !t.terminal) { /* finished first: the next get tells */ }
    }
  }
}

const t0 = Date.now();
for (let k = 0; k < KILLS; k++) {
  const srv = new Server();
  await srv.init();
  if (!(await checkAll(srv, 0.05))) fail('server died during checks');
  const killAt = Date.now() + 10 + Math.floor(rand() * 300);
  const timer = setTimeout(() => srv.kill(), killAt - Date.now());
  await workload(srv, killAt + 1000);
  clearTimeout(timer);
  const ex = await srv.kill();
  if (ex.sig !== 'SIGKILL' && ex.code !== 0) fail(`server exited by itself: ${JSON.stringify(ex)}\n${srv.stderr}`);
}

// Final: let everything finish, answering questions, and check every task.
const srv = new Server();
await srv.init();
const deadline = Date.now() + 120000;
for (;;) {
  let open = 0;
  for (const [id, t] of model) {
    if (t.terminal) continue;
    const v = await srv.call('durable_task_get', { taskId: id });
    observe(id, v);
    if (v.status === 'input_required') {
      const a = await srv.call('durable_task_respond', { taskId: id, response: 'yes' });
      if (a.accepted) t.answered.add(v.inputRequest.questionId);
    }
    if (!t.terminal) open++;
  }
  if (!open) break;
  if (Date.now() > deadline) fail(`${open} tasks never finished`);
  await new Promise((r) => setTimeout(r, 100));
}
await checkAll(srv, 1.0);
srv.proc.stdin.end();
await srv.exited;
const counts = {};
for (const t of model.values()) counts[`${t.tool}:${t.terminal}`] = (counts[`${t.tool}:${t.terminal}`] || 0) + 1;
console.log(`crash test: ${KILLS} kills, ${model.size} tasks, ${checks} checks, seed ${origSeed}, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
console.log(JSON.stringify(counts));
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`${KILLS} passed, 0 failed`);
