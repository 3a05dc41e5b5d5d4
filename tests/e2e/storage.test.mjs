// Storage faults and oversized input never become false promises.
//  - Arguments over server.maxArgumentsBytes are refused at validation and no task exists; the
//    state dir stays usable (a restart replays it).
//  - Arguments too large for one environment string (> 128 KiB) reach a plain job through
//    FORKPOINT_ARGS_FILE instead of failing every attempt with E2BIG; one too large for a
//    command-line word is the caller's invalid_arguments, not a retryable setup problem.
//  - A finished task keeps no empty work folders (a trivial task costs one folder, not four).
//  - A full disk (the state dir on a 2 MiB tmpfs in a private mount namespace, as root): the
//    answer of a call whose records could not be committed is held, never sent; ping,
//    initialize, tools/list and reads of durable tasks keep answering; new writes answer
//    storage_unavailable (ENOSPC); within 1 s of space returning the held answer comes out and
//    writes work again.  Shutting down (end of input, SIGTERM) while commits fail exits 1 and
//    says so on stderr.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
	BIN, RawServer, assert, call, envelopeOf, example, isStatus, rawToolResult, sleeperTool, startServer,
	startTask, until, waitTask, writeConfig,
} from './lib.mjs';

const padTool = (extra = {}) => ({
	name: 'pad',
	description: 'Prints one line; its pad argument only makes the call large.',
	mode: 'task',
	inputSchema: {
		type: 'object',
		properties: { n: { type: 'integer', minimum: 0 }, pad: { type: 'string' } },
		required: ['n'],
	},
	command: [example('plain-count'), '{n}'],
	...extra,
});

// A plain job that prints how many bytes of arguments it was given, wherever they came from.
const argsizeTool = {
	name: 'argsize',
	description: 'Prints the size of its arguments.',
	mode: 'sync',
	inputSchema: { type: 'object', properties: { pad: { type: 'string' } } },
	command: ['/bin/sh', '-c',
		'if [ -n "$FORKPOINT_ARGS_FILE" ]; then wc -c < "$FORKPOINT_ARGS_FILE"; ' +
		'else printf %s "$FORKPOINT_ARGS" | wc -c; fi'],
};

// The same size given to a plain program as one command-line word.
const argvTool = {
	name: 'argvword',
	description: 'Echoes its pad argument as one word of its command line.',
	mode: 'sync',
	inputSchema: { type: 'object', properties: { pad: { type: 'string' } }, required: ['pad'] },
	command: ['/bin/echo', '{pad}'],
};

const structured = (res) => res.structuredContent ?? JSON.parse(res.content[0].text);

describe('oversized arguments', () => {
	let srv;
	after(async () => { await srv?.close(); });

	it('over server.maxArgumentsBytes: refused, nothing created, the state dir replays', async () => {
		srv = await startServer({ tools: [padTool()], server: { maxArgumentsBytes: 4096 } });
		const res = await call(srv.client, 'pad', { n: 1, pad: 'x'.repeat(5000) });
		assert.equal(res.isError, true, JSON.stringify(res));
		const e = envelopeOf(res);
		assert.equal(e.code, 'invalid_arguments');
		assert.match(e.message, /maxArgumentsBytes/);
		const list = structured(await call(srv.client, 'durable_task_list', {}));
		assert.equal(list.tasks.length, 0, 'no task exists for the refused call');
		// Just under the limit is accepted.
		const ok = await call(srv.client, 'pad', { n: 1, pad: 'x'.repeat(3000) });
		assert.ok(!ok.isError, JSON.stringify(ok));
		// The journal holds nothing that refers to a task it never created: fsck agrees.
		const fsck = spawnSync(BIN, ['fsck', '--state', srv.stateDir], { encoding: 'utf8' });
		assert.equal(fsck.status, 0, fsck.stdout + fsck.stderr);
	});

	it('arguments over 128 KiB reach a plain job (FORKPOINT_ARGS_FILE), no E2BIG', async () => {
		await srv.close();
		srv = await startServer({ tools: [argsizeTool, argvTool] });   /* the default limit, 1 MiB */
		const big = 'y'.repeat(200 * 1024);
		const res = await call(srv.client, 'argsize', { pad: big });
		assert.ok(!res.isError, JSON.stringify(res).slice(0, 2000));
		const out = structured(res);
		const n = Number(String(out.output).trim());
		assert.equal(n, JSON.stringify({ pad: big }).length, `the job saw ${n} bytes of arguments`);
		// The copy of the arguments goes when the task has finished (with the empty work folder).
		const list = structured(await call(srv.client, 'durable_task_list', {}));
		assert.equal(list.tasks.length, 1);
		assert.ok(!fs.existsSync(path.join(srv.stateDir, 'tasks', list.tasks[0].taskId, 'work')),
			'work/.forkpoint-args.json and work/ were removed');
		// Small ones still come in the environment.
		const small = structured(await call(srv.client, 'argsize', { pad: 'z' }));
		assert.equal(Number(String(small.output).trim()), JSON.stringify({ pad: 'z' }).length);
	});

	it('a command-line word over 128 KiB: invalid_arguments, not a retryable setup problem', async () => {
		const res = await call(srv.client, 'argvword', { pad: 'w'.repeat(200 * 1024) });
		assert.equal(res.isError, true, JSON.stringify(res).slice(0, 1000));
		const e = envelopeOf(res);
		assert.equal(e.code, 'invalid_arguments', JSON.stringify(e).slice(0, 1000));
		assert.equal(e.retryable, false);
		assert.match(e.message, /Argument list too long/);
	});
});

describe('task folders', () => {
	let srv;
	after(async () => { await srv?.close(); });

	it('a finished task keeps no empty work folders; a running one has them', async () => {
		srv = await startServer({ tools: [padTool(), sleeperTool('sleeper')] });
		const h = await startTask(srv.client, 'pad', { n: 0 });
		await waitTask(srv.client, h.taskId, isStatus('completed'));
		const dir = path.join(srv.stateDir, 'tasks', h.taskId);
		assert.ok(fs.existsSync(dir), 'the task folder stays (its output.log) until expiry');
		assert.ok(!fs.existsSync(path.join(dir, 'work')), 'the empty work folder was removed');
		const s = await startTask(srv.client, 'sleeper', { seconds: 30 });
		const work = path.join(srv.stateDir, 'tasks', s.taskId, 'work');
		await until(() => fs.existsSync(path.join(work, 'outputs')), 5000, 'the running job\'s outputs/');
		assert.ok(fs.existsSync(path.join(work, 'inputs')));
		await call(srv.client, 'durable_task_cancel', { taskId: s.taskId });
	});
});

// ---- a full disk ---------------------------------------------------------------------------

function faultSkipReason() {
	if (process.getuid?.() !== 0)
		return 'needs root (a tmpfs mounted in a private mount namespace)';
	const probe = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c',
		'mount -t tmpfs -o size=1m fpprobe /mnt && umount /mnt'], { encoding: 'utf8' });
	if (probe.status !== 0)
		return `cannot mount a tmpfs in a private mount namespace: ${(probe.stderr || probe.error || '').toString().trim()}`;
	return false;
}
const skip = faultSkipReason();
if (skip)
	console.log(`# storage fault tests skipped: ${skip}`);

/** forkpoint mcp with its state dir on a 2 MiB tmpfs that only it (and /proc/PID/root) sees. */
function startOnTmpfs(tools) {
	const { dir, cfgPath, stateDir } = writeConfig({ tools });
	const raw = new RawServer({
		command: 'unshare',
		args: ['-m', '--propagation', 'private', 'sh', '-c',
			'mount -t tmpfs -o size=2m,mode=0700 fpstate "$0" && exec "$@"',
			stateDir, BIN, 'mcp', '--config', cfgPath, '--state', stateDir],
	});
	raw.dir = dir;
	// The state dir as this process reaches it: through the server's own mount namespace.
	raw.state = () => path.join(`/proc/${raw.proc.pid}/root`, stateDir);
	raw.close = async () => {
		await raw.kill();
		fs.rmSync(dir, { recursive: true, force: true });
	};
	return raw;
}

/** Fill the filesystem of dir until not one more byte fits; returns the filler's path. */
function fill(dir) {
	const p = path.join(dir, 'filler');
	const fd = fs.openSync(p, 'w');
	try {
		for (const size of [1 << 16, 4096, 1]) {
			const buf = Buffer.alloc(size, 0x61);
			for (;;) {
				try {
					if (fs.writeSync(fd, buf) < size)
						break;
				} catch (e) {
					if (e.code !== 'ENOSPC')
						throw e;
					break;
				}
			}
		}
	} finally {
		fs.closeSync(fd);
	}
	return p;
}

const TMPFS_MAGIC = 0x01021994;
const isResponse = (id) => (m) => m.id === id && ('result' in m || 'error' in m);

describe('a full disk', { skip }, () => {
	let raw;
	after(async () => { await raw?.close(); });

	it('reads keep answering, writes answer storage_unavailable, recovery within 1 s', async () => {
		raw = startOnTmpfs([padTool()]);
		await raw.initialize();
		assert.equal(fs.statfsSync(raw.state()).type, TMPFS_MAGIC, 'the state dir is the small tmpfs');
		// A task made while the disk had room: durable, and readable all along.
		const a = rawToolResult(await raw.request('a', 'tools/call', { name: 'pad', arguments: { n: 1 } }));
		const aid = a.structuredContent.taskId;
		await until(async () => {
			const r = await raw.request(`get-a-${Date.now()}`, 'tools/call',
				{ name: 'durable_task_get', arguments: { taskId: aid } });
			return r.result?.structuredContent?.status === 'completed';
		}, 10000, 'task a completed');

		const filler = fill(raw.state());
		// Its create record needs new pages: the commit fails with ENOSPC, and the answer is held.
		raw.send({ jsonrpc: '2.0', id: 'c1', method: 'tools/call',
			params: { name: 'pad', arguments: { n: 1, pad: 'p'.repeat(32 * 1024) } } });
		await until(() => raw.stderr.includes('journal commit failed'), 5000, 'the failed commit logged');

		// Housekeeping and reads of durable state answer at once.
		const ping = await raw.request('ping1', 'ping', undefined, { timeoutMs: 2000 });
		assert.deepEqual(ping.result, {});
		const init = await raw.request('init2', 'initialize', {
			protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e-raw', version: '1' },
		}, { timeoutMs: 2000 });
		assert.ok(init.result?.protocolVersion, JSON.stringify(init));
		const e26 = { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
			'io.modelcontextprotocol/clientCapabilities': {} } };
		const disc = await raw.request('disc', 'server/discover', e26, { timeoutMs: 2000 });
		assert.ok(disc.result, JSON.stringify(disc));
		const e26call = rawToolResult(await raw.request('e26-call', 'tools/call',
			{ name: 'pad', arguments: { n: 1 }, ...e26 }, { timeoutMs: 2000 }));
		assert.equal(envelopeOf(e26call).code, 'storage_unavailable');
		const tl = await raw.request('tl', 'tools/list', {}, { timeoutMs: 2000 });
		assert.ok(tl.result?.tools?.some((t) => t.name === 'pad'), JSON.stringify(tl).slice(0, 500));
		const get = await raw.request('get-a', 'tools/call',
			{ name: 'durable_task_get', arguments: { taskId: aid } }, { timeoutMs: 2000 });
		assert.equal(get.result?.structuredContent?.status, 'completed', JSON.stringify(get).slice(0, 500));

		// A new write is refused, retryably, naming the errno; nothing is created for it.
		const c2 = rawToolResult(await raw.request('c2', 'tools/call',
			{ name: 'pad', arguments: { n: 1 } }, { timeoutMs: 2000 }));
		assert.equal(c2.isError, true);
		const e = envelopeOf(c2);
		assert.equal(e.code, 'storage_unavailable');
		assert.equal(e.retryable, true);
		assert.equal(e.errno, 'ENOSPC');
		assert.match(e.message, /ENOSPC/);
		const cancel = rawToolResult(await raw.request('cancel-a', 'tools/call',
			{ name: 'durable_task_cancel', arguments: { taskId: aid } }, { timeoutMs: 2000 }));
		assert.equal(envelopeOf(cancel).code, 'storage_unavailable');

		// The call whose records are not durable was never acknowledged.
		assert.ok(!raw.messages.some(isResponse('c1')), 'no answer to c1 while its commit fails');

		// Space returns: the held answer comes out within a second, with no other prompt.
		const t0 = Date.now();
		fs.unlinkSync(filler);
		const c1 = await raw.waitFor(isResponse('c1'), { timeoutMs: 5000, what: 'the held answer to c1' });
		const took = Date.now() - t0;
		console.log(`# held answer released ${took} ms after space returned`);
		assert.ok(took <= 1000, `held answer released ${took} ms after space returned`);
		const c1id = rawToolResult(c1).structuredContent.taskId;
		assert.match(c1id, /^[0-9a-f]{32}$/);

		// Writes work again.
		const c3 = rawToolResult(await raw.request('c3', 'tools/call', { name: 'pad', arguments: { n: 1 } }));
		assert.ok(!c3.isError, JSON.stringify(c3));
		const list = rawToolResult(await raw.request('list', 'tools/call',
			{ name: 'durable_task_list', arguments: {} })).structuredContent;
		const ids = list.tasks.map((t) => t.taskId).sort();
		assert.deepEqual(ids, [aid, c1id, c3.structuredContent.taskId].sort(),
			'the refused call left no task behind');
		assert.deepEqual(raw.badLines, []);
	});

	for (const how of ['end of input', 'SIGTERM']) {
		it(`shutting down (${how}) while commits fail exits non-zero and says so`, async () => {
			await raw?.close();
			raw = startOnTmpfs([padTool()]);
			await raw.initialize();
			fill(raw.state());
			raw.send({ jsonrpc: '2.0', id: 'h1', method: 'tools/call',
				params: { name: 'pad', arguments: { n: 1, pad: 'p'.repeat(32 * 1024) } } });
			await until(() => raw.stderr.includes('journal commit failed'), 5000, 'the failed commit logged');
			if (how === 'SIGTERM')
				raw.proc.kill('SIGTERM');
			else
				raw.closeStdin();
			const exit = await raw.waitExit(10000);
			assert.ok(exit, `the server exited after ${how}`);
			assert.equal(exit.code, 1, `exit ${JSON.stringify(exit)}`);
			assert.match(raw.stderr, /could not be made durable/);
			assert.ok(!raw.messages.some(isResponse('h1')), 'the held answer was never sent');
		});
	}
});
