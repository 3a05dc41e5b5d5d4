// Shared helpers for the end-to-end tests: where the binaries are, config fixtures written
// into a temp dir, a supervisor driven through the official MCP SDK client, a supervisor
// driven by raw JSON-RPC lines, task polling with deadlines, and process checks via /proc.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BUILD = path.resolve(ROOT, process.env.BUILD || 'build');
export const BIN = path.join(BUILD, 'forkpoint');
export const JOB_HELPER = path.join(BUILD, 'forkpoint-job');
export const example = (name) => path.join(BUILD, 'examples', name);
export const helper = (name) => path.join(BUILD, 'tests', 'helpers', name);
export const SHELL_REPORT = path.join(ROOT, 'runner', 'examples', 'shell-report.sh');

if (!fs.existsSync(BIN))
	throw new Error(`${BIN} does not exist: build it first (make BUILD=${path.relative(ROOT, BUILD)} tests)`);

export const TASK_ID = /^[0-9a-f]{32}$/;
export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
export const FACADE_TOOLS = ['durable_task_get', 'durable_task_respond', 'durable_task_cancel',
	'durable_task_list'];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let markerSeq = 0;
/** A word unique to this test run, put into a job's argv so the job can be found in /proc. */
export function marker(tag = 'job') {
	markerSeq += 1;
	return `fpe2e-${tag}-${process.pid}-${markerSeq}-${Math.random().toString(36).slice(2, 8)}`;
}

// ---- tool fixtures ---------------------------------------------------------------------

export const REPORT_SCHEMA = {
	type: 'object',
	properties: {
		topic: { type: 'string', minLength: 1 },
		sections: { type: 'integer', minimum: 1, maximum: 10, default: 3 },
		delayMs: { type: 'integer', minimum: 0, maximum: 600000, default: 200 },
		ask: { type: 'boolean', default: false },
		failAt: { type: 'integer', minimum: 1 },
	},
	required: ['topic'],
};

export function reportTool(name = 'report', extra = {}) {
	return {
		name,
		title: 'Generate a report',
		description: 'Writes a multi-section report about a topic.',
		inputSchema: REPORT_SCHEMA,
		command: [example('report-generator')],
		...extra,
	};
}

export function countTool(name = 'count', extra = {}) {
	return {
		name,
		description: 'Prints numbered lines, then exits with the given status.',
		inputSchema: {
			type: 'object',
			properties: {
				n: { type: 'integer', minimum: 0, maximum: 100000 },
				exit: { type: 'integer', minimum: 0, maximum: 255, default: 0 },
			},
			required: ['n'],
		},
		command: [example('plain-count'), '{n}', '{exit}'],
		...extra,
	};
}

/** A tool running one of tests/helpers with a "mark" argument that ends up in its argv. */
export function helperTool(name, prog, argTemplate, properties, extra = {}) {
	return {
		name,
		description: `Test helper ${prog}.`,
		inputSchema: {
			type: 'object',
			properties: { mark: { type: 'string', default: 'none' }, ...properties },
			required: Object.keys(properties).filter((k) => properties[k].default === undefined),
		},
		command: [helper(prog), ...argTemplate, '{mark}'],
		...extra,
	};
}

export const sleeperTool = (name = 'sleeper', extra = {}) =>
	helperTool(name, 'sleeper', ['{seconds}', '-'], { seconds: { type: 'number', default: 60 } }, extra);
export const stubbornTool = (name = 'stubborn', extra = {}) =>
	helperTool(name, 'stubborn', ['-'], {}, extra);
export const cpubusyTool = (name = 'cpubusy', extra = {}) =>
	helperTool(name, 'cpubusy', ['{seconds}'], { seconds: { type: 'number', default: 2 } }, extra);
export const badframesTool = (name = 'badframes', extra = {}) =>
	helperTool(name, 'badframes', ['{mode}'], { mode: { type: 'string' } }, extra);

// ---- config files ----------------------------------------------------------------------

/** Write a config into a fresh temp dir.  Returns {dir, cfgPath, stateDir}. */
export function writeConfig({ tools = [], server = {}, raw } = {}) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fp-e2e-'));
	const cfgPath = path.join(dir, 'config.json');
	const stateDir = path.join(dir, 'state');
	fs.mkdirSync(stateDir);
	const cfg = raw ?? {
		server: { name: 'e2e', maxConcurrent: 2, cancelGraceSeconds: 1, ...server },
		tools,
	};
	fs.writeFileSync(cfgPath, typeof cfg === 'string' ? cfg : JSON.stringify(cfg, null, 2));
	return { dir, cfgPath, stateDir };
}

function removeDir(dir) {
	if (!process.env.KEEP_E2E)
		fs.rmSync(dir, { recursive: true, force: true });
}

// ---- a supervisor behind the SDK client ------------------------------------------------

/** Start `forkpoint mcp` with the given tools and connect an SDK client to it. */
export async function startServer({ tools = [], server = {}, env } = {}) {
	const { dir, cfgPath, stateDir } = writeConfig({ tools, server });
	const transport = new StdioClientTransport({
		command: BIN,
		args: ['mcp', '--config', cfgPath, '--state', stateDir],
		stderr: 'pipe',
		env,
	});
	let stderr = '';
	transport.stderr.on('data', (d) => { stderr += d.toString(); });
	const client = new Client({ name: 'e2e', version: '1' });
	const clientErrors = [];
	client.onerror = (e) => clientErrors.push(e);
	try {
		await client.connect(transport);
	} catch (e) {
		await transport.close().catch(() => {});
		removeDir(dir);
		e.message += `\nserver stderr:\n${stderr}`;
		throw e;
	}
	return {
		client, transport, dir, cfgPath, stateDir, clientErrors,
		get stderr() { return stderr; },
		get pid() { return transport.pid; },
		/** Closes stdin like an MCP host; the server must then exit 0 by itself (within the
		 *  SDK's 2 s before SIGTERM).  A sanitizer report makes the exit status non-zero. */
		async close() {
			const proc = transport._process;   // the SDK forgets it in close()
			await client.close().catch(() => {});
			removeDir(dir);
			if (proc && (proc.exitCode !== 0 || proc.signalCode !== null))
				throw new Error(`server did not exit 0 after stdin EOF (code ${proc.exitCode}, signal ${proc.signalCode}); stderr tail:\n${stderr.slice(-4000)}`);
		},
	};
}

/** tools/call through the SDK; checks the "same JSON twice" rule on every answer. */
export async function call(client, name, args = {}, options) {
	const res = await client.callTool({ name, arguments: args }, undefined, options);
	checkDouble(res, name);
	return res;
}

/** Every result carries its JSON as structuredContent and as the first text block. */
export function checkDouble(res, what = 'result') {
	assert.ok(Array.isArray(res.content) && res.content.length >= 1, `${what}: content blocks`);
	assert.equal(res.content[0].type, 'text', `${what}: first block is text`);
	assert.ok(res.structuredContent && typeof res.structuredContent === 'object',
		`${what}: structuredContent present: ${JSON.stringify(res)}`);
	assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent,
		`${what}: text block equals structuredContent`);
}

/** Call a configured task-mode tool; returns the handle after checking its documented shape. */
export async function startTask(client, name, args = {}) {
	const res = await call(client, name, args);
	assert.ok(!res.isError, `${name} call failed: ${JSON.stringify(res.structuredContent)}`);
	const h = res.structuredContent;
	assert.match(h.taskId ?? '', TASK_ID, `handle taskId: ${JSON.stringify(h)}`);
	return h;
}

export async function getTask(client, taskId) {
	const res = await call(client, 'durable_task_get', { taskId });
	assert.ok(!res.isError, `durable_task_get ${taskId}: ${JSON.stringify(res.structuredContent)}`);
	assert.equal(res.structuredContent.taskId, taskId);
	return res.structuredContent;
}

/**
 * Poll durable_task_get until pred(task) holds.  A task that reaches a terminal status that
 * does not satisfy pred fails at once (with the task JSON), so a wrong outcome is not
 * mistaken for slowness.  onPoll sees every snapshot.
 */
export async function waitTask(client, taskId, pred, { timeoutMs = 20000, intervalMs = 40, onPoll } = {}) {
	const deadline = Date.now() + timeoutMs;
	let last;
	for (;;) {
		last = await getTask(client, taskId);
		if (onPoll)
			onPoll(last);
		if (pred(last))
			return last;
		if (TERMINAL.has(last.status))
			assert.fail(`task ${taskId} ended ${last.status} without meeting the condition: ${JSON.stringify(last)}`);
		if (Date.now() > deadline)
			assert.fail(`task ${taskId} timed out after ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
		await sleep(intervalMs);
	}
}

export const isStatus = (...s) => (t) => s.includes(t.status);

/** Poll until cond() is truthy (returns its value) or fail after timeoutMs. */
export async function until(cond, timeoutMs, what, intervalMs = 25) {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const v = await cond();
		if (v)
			return v;
		if (Date.now() > deadline)
			assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
		await sleep(intervalMs);
	}
}

/** The envelope of a failed facade call (isError true, structuredContent.error). */
export function envelopeOf(res) {
	assert.equal(res.isError, true, `expected isError: ${JSON.stringify(res)}`);
	const e = res.structuredContent?.error;
	assert.ok(e, `error envelope missing: ${JSON.stringify(res.structuredContent)}`);
	checkEnvelope(e);
	return e;
}

export function checkEnvelope(e) {
	assert.equal(typeof e.code, 'string');
	assert.equal(typeof e.message, 'string');
	assert.ok(e.message.length > 0);
	assert.equal(typeof e.retryable, 'boolean', `retryable: ${JSON.stringify(e)}`);
	assert.equal(typeof e.recoveryHint, 'string', `recoveryHint: ${JSON.stringify(e)}`);
}

// ---- processes -------------------------------------------------------------------------

function procState(pid) {
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
		return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
	} catch {
		return null;
	}
}

/** Host pids of live (non-zombie) processes whose argv contains the word `mark`. */
export function pidsWithMarker(mark) {
	const out = [];
	for (const ent of fs.readdirSync('/proc')) {
		if (!/^\d+$/.test(ent))
			continue;
		let argv;
		try {
			argv = fs.readFileSync(`/proc/${ent}/cmdline`, 'utf8').split('\0');
		} catch {
			continue;
		}
		if (argv.includes(mark) && procState(ent) !== 'Z')
			out.push(Number(ent));
	}
	return out;
}

/**
 * True while pid runs.  kill(pid, 0) answers ESRCH once it is reaped; a zombie (state Z) has
 * already died and only waits for its parent, so it counts as gone too.
 */
export function isAlive(pid) {
	try {
		process.kill(pid, 0);
	} catch (e) {
		if (e.code === 'ESRCH')
			return false;
		throw e;
	}
	return procState(pid) !== 'Z';
}

/** Clean-up after a failed check: SIGKILL the test's own job processes that outlived it. */
export function killAll(pids) {
	for (const p of pids) {
		try {
			process.kill(p, 'SIGKILL');
		} catch {
			// already gone
		}
	}
}

export async function waitGone(pids, timeoutMs, what = 'processes') {
	const t0 = Date.now();
	try {
		await until(() => pids.every((p) => !isAlive(p)), timeoutMs, `${what} ${pids.join(',')} to be gone`);
	} catch (e) {
		const left = pids.filter(isAlive).map((p) => `${p} (state ${procState(p)})`);
		e.message += `; still running: ${left.join(', ')}`;
		killAll(pids);
		throw e;
	}
	return Date.now() - t0;
}

// ---- a supervisor driven by raw JSON-RPC lines -----------------------------------------

/**
 * Spawns `forkpoint mcp` by hand (or `command` with `args`, for a wrapper that execs it).  Every
 * stdout line is parsed; a line that is not a JSON-RPC 2.0 message is kept in badLines (tests
 * assert there are none).
 */
export class RawServer {
	constructor({ cfgPath, stateDir, args, command } = {}) {
		this.proc = spawn(command ?? BIN, args ?? ['mcp', '--config', cfgPath, '--state', stateDir],
			{ stdio: ['pipe', 'pipe', 'pipe'] });
		this.messages = [];
		this.badLines = [];
		this.lines = [];   // every stdout line as text (JSON.parse rounds big numbers)
		this.stderr = '';
		this.waiters = new Set();
		this.exited = new Promise((resolve) => {
			this.proc.on('exit', (code, signal) => {
				this.exit = { code, signal };
				resolve(this.exit);
				this.wake();
			});
		});
		this.proc.on('error', (e) => {
			this.exit = { code: null, signal: null, error: e.message };
			this.wake();
		});
		this.proc.stdin.on('error', () => {});
		this.proc.stderr.on('data', (d) => { this.stderr += d.toString(); });
		let buf = Buffer.alloc(0);
		this.proc.stdout.on('data', (d) => {
			buf = Buffer.concat([buf, d]);
			let i;
			while ((i = buf.indexOf(10)) >= 0) {
				this.onLine(buf.subarray(0, i).toString('utf8'));
				buf = buf.subarray(i + 1);
			}
		});
	}

	onLine(line) {
		this.lines.push(line);
		let msg;
		try {
			msg = JSON.parse(line);
		} catch {
			this.badLines.push(line);
			return;
		}
		if (!msg || typeof msg !== 'object' || Array.isArray(msg) || msg.jsonrpc !== '2.0')
			this.badLines.push(line);
		else
			this.messages.push(msg);
		this.wake();
	}

	wake() {
		for (const w of this.waiters)
			w();
	}

	send(msg) {
		this.proc.stdin.write(typeof msg === 'string' ? `${msg}\n` : `${JSON.stringify(msg)}\n`);
	}

	sendBytes(buf) {
		this.proc.stdin.write(buf);
	}

	/** Index to pass as `from` so only later messages match. */
	mark() {
		return this.messages.length;
	}

	/** The first message at index >= from satisfying pred. */
	waitFor(pred, { from = 0, timeoutMs = 5000, what = 'a message' } = {}) {
		return new Promise((resolve, reject) => {
			const check = () => {
				for (let i = from; i < this.messages.length; i++) {
					if (pred(this.messages[i])) {
						done();
						resolve(this.messages[i]);
						return;
					}
				}
				if (this.exit) {
					done();
					reject(new Error(`server exited (${JSON.stringify(this.exit)}) while waiting for ${what}; stderr:\n${this.stderr.slice(-2000)}`));
				}
			};
			const timer = setTimeout(() => {
				done();
				reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
			}, timeoutMs);
			const done = () => {
				clearTimeout(timer);
				this.waiters.delete(check);
			};
			this.waiters.add(check);
			check();
		});
	}

	/** The response (result or error) with this id. */
	response(id, opts = {}) {
		return this.waitFor((m) => m.id === id && ('result' in m || 'error' in m),
			{ what: `response to id ${JSON.stringify(id)}`, ...opts });
	}

	async request(id, method, params, opts) {
		const from = this.mark();
		this.send(params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params });
		return this.response(id, { from, ...opts });
	}

	notify(method, params) {
		this.send(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
	}

	async initialize(protocolVersion = '2025-11-25', id = 'init') {
		const res = await this.request(id, 'initialize', {
			protocolVersion, capabilities: {}, clientInfo: { name: 'e2e-raw', version: '1' },
		});
		assert.ok(res.result, `initialize failed: ${JSON.stringify(res)}`);
		this.notify('notifications/initialized');
		return res.result;
	}

	closeStdin() {
		this.proc.stdin.end();
	}

	/** Resolves to {code, signal} or null if still running after timeoutMs. */
	async waitExit(timeoutMs) {
		let t;
		const r = await Promise.race([this.exited,
			new Promise((res) => { t = setTimeout(() => res(null), timeoutMs); })]);
		clearTimeout(t);
		return r;
	}

	async kill() {
		if (!this.exit) {
			this.proc.kill('SIGKILL');
			await this.exited;
		}
	}
}

/** writeConfig + RawServer; close() kills the process and removes the temp dir. */
export function startRaw(opts = {}) {
	const { dir, cfgPath, stateDir } = writeConfig(opts);
	const raw = new RawServer({ cfgPath, stateDir });
	raw.dir = dir;
	raw.cfgPath = cfgPath;
	raw.stateDir = stateDir;
	raw.close = async () => {
		await raw.kill();
		removeDir(dir);
	};
	return raw;
}

/** A tools/call result from a raw response, parsed. */
export function rawToolResult(resp) {
	assert.ok(resp.result, `expected a result: ${JSON.stringify(resp)}`);
	checkDouble(resp.result, 'raw tools/call');
	return resp.result;
}

export { assert };
