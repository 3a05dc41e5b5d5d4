// Results and checkpoints under pressure (tests/helpers/bigresult.c): a frame of a million
// nils, results that expand when written as JSON, large results kept in the blob store and
// read back while ping still answers, a result that cannot be stored yet, a missing or damaged
// result blob after a restart, superseded checkpoint blobs, and the checkpoint and disk limits.
import { describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
	assert, BIN, call, checkEnvelope, envelopeOf, getTask, helper, isStatus, TERMINAL, until, waitTask,
	writeConfig,
} from './lib.mjs';

const bigTool = (name = 'big', sandbox = {}) => ({
	name,
	description: 'Test helper bigresult.',
	inputSchema: {
		type: 'object',
		properties: {
			mode: { type: 'string' }, n: { type: 'integer' }, arg: { type: 'integer', default: 0 },
		},
		required: ['mode', 'n'],
	},
	command: [helper('bigresult'), '{mode}', '{n}', '{arg}'],
	sandbox: { profile: 'none', ...sandbox },
});

/** A server on a given config and state dir (so a test can restart it on the same state). */
async function serve(cfgPath, stateDir) {
	const transport = new StdioClientTransport({
		command: BIN, args: ['mcp', '--config', cfgPath, '--state', stateDir], stderr: 'pipe',
	});
	let stderr = '';
	transport.stderr.on('data', (d) => { stderr += d.toString(); });
	const client = new Client({ name: 'e2e-results', version: '1' });
	await client.connect(transport);
	return {
		client,
		get pid() { return transport.pid; },
		get stderr() { return stderr; },
		async close() {
			const proc = transport._process;
			await client.close().catch(() => {});
			if (proc && proc.exitCode === null && proc.signalCode === null)
				await new Promise((r) => proc.once('exit', r));
			// A sanitizer report makes the exit status non-zero.
			if (proc && (proc.exitCode !== 0 || proc.signalCode !== null))
				throw new Error(`server did not exit 0 (code ${proc.exitCode}, signal ${proc.signalCode}); stderr tail:\n${stderr.slice(-4000)}`);
		},
	};
}

function setup(tools, server = {}) {
	const w = writeConfig({ tools, server });
	return { ...w, done() { if (!process.env.KEEP_E2E) fs.rmSync(w.dir, { recursive: true, force: true }); } };
}

/** kB fields of /proc/PID/status. */
function memKB(pid) {
	const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
	const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)[1]);
	return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

function blobFiles(stateDir) {
	const top = path.join(stateDir, 'blobs');
	const out = [];
	if (!fs.existsSync(top) || !fs.statSync(top).isDirectory())
		return out;
	for (const d of fs.readdirSync(top))
		for (const f of fs.readdirSync(path.join(top, d)))
			if (/^[0-9a-f]{64}$/.test(f))
				out.push({ name: f, path: path.join(top, d, f), size: fs.statSync(path.join(top, d, f)).size });
	return out;
}

async function start(client, args) {
	const res = await call(client, 'big', args);
	assert.ok(!res.isError, JSON.stringify(res.structuredContent));
	return res.structuredContent.taskId;
}

const finished = (client, id, timeoutMs = 30000) =>
	waitTask(client, id, (t) => TERMINAL.has(t.status), { timeoutMs });

async function pingMs(client) {
	const t0 = Date.now();
	assert.deepEqual(await client.ping(), {});
	return Date.now() - t0;
}

describe('results', () => {
	for (const profile of ['none', 'default', 'strict'])
	it(`a frame of a million nils is refused before it is unpacked; memory stays bounded (${profile})`, async () => {
		const s = setup([bigTool('big', { profile })]);
		const srv = await serve(s.cfgPath, s.stateDir);
		try {
			const before = memKB(srv.pid);
			const id = await start(srv.client, { mode: 'nils', n: (8 << 20) - 64 });
			const t = await finished(srv.client, id);
			assert.equal(t.status, 'failed', JSON.stringify(t));
			checkEnvelope(t.error);
			assert.match(t.error.message, /more than 1048576 values/);
			const after = memKB(srv.pid);
			const grew = after.hwm - before.hwm;
			console.log(`# nils frame: peak RSS grew by ${grew} kB (${before.hwm} -> ${after.hwm} kB)`);
			// Before the value budget this frame cost 900 MB at peak and 650 MB for the task's life.
			const cap = (process.env.BUILD ?? '').includes('san') ? 256 : 64;
			assert.ok(grew < cap * 1024, `peak RSS grew by ${grew} kB`);
			assert.ok((await pingMs(srv.client)) < 500);
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('results that expand past resultMaxBytes as JSON fail with resource_limit', async () => {
		const s = setup([bigTool()], { resultMaxBytes: 4 << 20 });
		const srv = await serve(s.cfgPath, s.stateDir);
		try {
			// 1 MiB of control characters: 6 MiB of JSON.
			const id = await start(srv.client, { mode: 'string', n: 1 << 20, arg: 1 });
			const t = await finished(srv.client, id);
			assert.equal(t.status, 'failed', JSON.stringify(t));
			assert.equal(t.error.code, 'resource_limit');
			assert.equal(t.error.limit, 'resultMaxBytes');
			assert.equal(t.error.limitValue, 4 << 20);
			// 1 M nils within the node budget: 5 MiB of JSON, over the limit too.
			const id2 = await start(srv.client, { mode: 'nullarray', n: (1 << 20) - 8 });
			const t2 = await finished(srv.client, id2);
			assert.equal(t2.error?.limit, 'resultMaxBytes', JSON.stringify(t2));
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a large result lives in the blob store, is read back whole, and ping answers meanwhile', async () => {
		const s = setup([bigTool()]);
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const n = (1 << 20) - 8;   // 5 MiB of JSON from a 1 MiB frame
			const id = await start(srv.client, { mode: 'nullarray', n });
			const t = await finished(srv.client, id);
			assert.equal(t.status, 'completed', JSON.stringify(t).slice(0, 2000));
			assert.equal(t.resultUri, `forkpoint://tasks/${id}/result`);
			assert.equal(t.resultBytes, 5 * n + 1);
			for (const k of ['attempt', 'createdAt', 'updatedAt', 'expiresAt'])
				assert.ok(t[k] !== undefined, `${k} in the summary: ${JSON.stringify(t)}`);
			assert.equal(t.summary, `an array of ${n} items`);
			const blobs = blobFiles(s.stateDir);
			assert.equal(blobs.length, 1);
			assert.equal(blobs[0].size, 5 * n + 1);
			console.log(`# after a 5 MiB result: RSS ${memKB(srv.pid).rss} kB`);

			const reading = srv.client.readResource({ uri: t.resultUri });
			const pings = [pingMs(srv.client), pingMs(srv.client)];
			const full = await reading;
			const ms = Math.max(...(await Promise.all(pings)));
			console.log(`# ping while a 5 MiB result is read: ${ms} ms`);
			// The ping's answer follows the 5 MiB one on the same pipe: this bounds both.
			assert.ok(ms < ((process.env.BUILD ?? '').includes('san') ? 6000 : 3000), `ping took ${ms} ms`);
			const arr = JSON.parse(full.contents[0].text);
			assert.equal(arr.length, n);
			assert.equal(arr[n - 1], null);

			// 16 MiB of JSON (the default resultMaxBytes) from an 8 MiB frame: too large for
			// resources/read, downloaded in chunks instead.
			const m = (8 << 20) - 64;
			const id2 = await start(srv.client, { mode: 'string', n: m, arg: 34 });
			const t2 = await finished(srv.client, id2);
			assert.equal(t2.status, 'completed', JSON.stringify(t2).slice(0, 2000));
			assert.equal(t2.resultBytes, 2 * m + 2);
			assert.match(t2.note, /file_transfer_open/);
			await assert.rejects(srv.client.readResource({ uri: t2.resultUri }),
				(e) => e.code === -32602 && /file_transfer_open/.test(e.message));
			const o = await call(srv.client, 'file_transfer_open', { direction: 'download', path: t2.resultUri });
			assert.ok(!o.isError, JSON.stringify(o.structuredContent));
			assert.equal(o.structuredContent.size, 2 * m + 2);
			const parts = [];
			for (let off = 0; ;) {
				const r = await call(srv.client, 'file_transfer_read',
					{ handle: o.structuredContent.handle, offset: off, length: 1 << 20 });
				assert.ok(!r.isError, JSON.stringify(r.structuredContent));
				parts.push(Buffer.from(r.structuredContent.data, 'base64'));
				off = r.structuredContent.nextOffset;
				if (r.structuredContent.eof)
					break;
			}
			const v = JSON.parse(Buffer.concat(parts).toString('utf8'));
			assert.equal(v.length, m);
			assert.ok(/^"+$/.test(v));

			// A restart does not load them again: 21 MiB of results cost no memory.
			await srv.close();
			srv = await serve(s.cfgPath, s.stateDir);
			const after = await call(srv.client, 'durable_task_get', { taskId: id2 });
			assert.equal(after.structuredContent.resultBytes, 2 * m + 2);
			const mem = memKB(srv.pid);
			console.log(`# after a restart with 21 MiB of results: peak RSS ${mem.hwm} kB`);
			assert.ok(mem.hwm < 64 * 1024, `peak RSS ${mem.hwm} kB`);
		} catch (e) {
			e.message += `\nserver stderr:\n${srv.stderr.slice(-3000)}`;
			throw e;
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a result that cannot be stored keeps the task working, then completes once storage is back', async () => {
		const s = setup([bigTool()]);
		// blobs/ is a file: every blob write fails (ENOTDIR), even for root.
		fs.writeFileSync(path.join(s.stateDir, 'blobs'), 'not a directory');
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const id = await start(srv.client, { mode: 'nullarray', n: 100000 });
			const w = await waitTask(srv.client, id, (t) => /could not be stored yet/.test(t.progress?.message ?? t.message ?? JSON.stringify(t)),
				{ timeoutMs: 20000 });
			assert.equal(w.status, 'working', JSON.stringify(w));
			// Not completed across a restart either: nothing was promised.
			await srv.close();
			srv = await serve(s.cfgPath, s.stateDir);
			const again = await getTask(srv.client, id);
			assert.ok(!TERMINAL.has(again.status), JSON.stringify(again));
			fs.unlinkSync(path.join(s.stateDir, 'blobs'));
			const t = await waitTask(srv.client, id, isStatus('completed'), { timeoutMs: 40000 });
			assert.equal(t.resultBytes, 500001);
			const show = spawnSync(BIN, ['show', id, '--state', s.stateDir], { encoding: 'utf8' });
			assert.equal(show.status, 0, show.stderr);
			assert.match(show.stdout, /result\s+500001 bytes of JSON in blob [0-9a-f]{64}: an array of 100000 items/);
			await srv.close();
			srv = await serve(s.cfgPath, s.stateDir);
			const res = await srv.client.readResource({ uri: `forkpoint://tasks/${id}/result` });
			assert.equal(JSON.parse(res.contents[0].text).length, 100000);
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a missing or damaged result blob says task_lost and keeps the task; fsck reports it', async () => {
		const s = setup([bigTool()]);
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const a = await start(srv.client, { mode: 'nullarray', n: 100000 });
			const b = await start(srv.client, { mode: 'nullarray', n: 100001 });
			await waitTask(srv.client, a, isStatus('completed'));
			await waitTask(srv.client, b, isStatus('completed'));
			await srv.close();
			const blobs = blobFiles(s.stateDir);
			const ba = blobs.find((x) => x.size === 500001);
			const bb = blobs.find((x) => x.size === 500006);
			fs.unlinkSync(ba.path);
			const fd = fs.openSync(bb.path, 'r+');
			fs.writeSync(fd, Buffer.from('x'), 0, 1, 10);
			fs.closeSync(fd);

			const fsck = spawnSync(BIN, ['fsck', '--state', s.stateDir], { encoding: 'utf8' });
			assert.equal(fsck.status, 1, fsck.stdout + fsck.stderr);
			assert.match(fsck.stdout, new RegExp(`task ${a}: result blob ${ba.name}`));
			assert.match(fsck.stdout, new RegExp(`task ${b}: result blob ${bb.name}: content does not match`));
			assert.match(fsck.stdout, /task_lost/);

			srv = await serve(s.cfgPath, s.stateDir);
			const ga = await call(srv.client, 'durable_task_get', { taskId: a });
			const ea = envelopeOf(ga);
			assert.equal(ea.code, 'task_lost', JSON.stringify(ea));
			assert.equal(ea.blob, ba.name);
			await assert.rejects(srv.client.readResource({ uri: `forkpoint://tasks/${b}/result` }),
				(e) => /task_lost/.test(e.message) && e.message.includes(bb.name));
			const gb = await call(srv.client, 'durable_task_get', { taskId: b });
			assert.equal(envelopeOf(gb).code, 'task_lost');
			const dl = await call(srv.client, 'file_transfer_open',
				{ direction: 'download', path: `forkpoint://tasks/${a}/result` });
			assert.equal(envelopeOf(dl).code, 'not_found');
			assert.match(envelopeOf(dl).message, new RegExp(`task_lost.*${ba.name}`));
			const list = await call(srv.client, 'durable_task_list', {});
			const ids = list.structuredContent.tasks.map((x) => x.taskId);
			assert.ok(ids.includes(a) && ids.includes(b), 'both tasks are kept');
		} finally {
			await srv.close();
			s.done();
		}
	});
});

describe('expiry', () => {
	it('an expired task takes its result blob with it', async () => {
		const s = setup([{ ...bigTool(), ttlSeconds: 1 }]);
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const id = await start(srv.client, { mode: 'nullarray', n: 100000 });
			const t = await waitTask(srv.client, id, isStatus('completed'));
			assert.equal(blobFiles(s.stateDir).length, 1);
			await srv.close();
			// The TTL is wall-clock time: wait for it to pass, then the start-up collector runs.
			const exp = Date.parse(t.expiresAt);
			await until(() => Date.now() > exp + 50, 5000, 'the TTL to pass');
			srv = await serve(s.cfgPath, s.stateDir);
			const g = await call(srv.client, 'durable_task_get', { taskId: id });
			assert.equal(envelopeOf(g).code, 'expired');
			assert.equal(blobFiles(s.stateDir).length, 0, 'the result blob is deleted');
		} finally {
			await srv.close();
			s.done();
		}
	});
});

describe('checkpoints', () => {
	it('superseded checkpoint blobs are deleted once the newer one is durable', async () => {
		const s = setup([bigTool()]);
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const id = await start(srv.client, { mode: 'checkpoints', n: 100, arg: 64 << 10 });
			const t = await finished(srv.client, id);
			assert.equal(t.status, 'completed', JSON.stringify(t));
			assert.equal(t.result.checkpoints, 100);
			const left = blobFiles(s.stateDir);
			assert.ok(left.length <= 1, `blobs left: ${left.length}`);
			await srv.close();
			srv = await serve(s.cfgPath, s.stateDir);
			assert.equal((await getTask(srv.client, id)).status, 'completed');
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a superseded blob that another task still holds is kept', async () => {
		const s = setup([bigTool()]);
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const size = 8 << 10;
			const holder = await start(srv.client, { mode: 'hold', n: size });
			await until(() => blobFiles(s.stateDir).length === 1, 10000, 'the holder\'s checkpoint');
			const shared = blobFiles(s.stateDir)[0].name;
			// Its first checkpoint has the same bytes as the holder's: one blob, two references.
			const id = await start(srv.client, { mode: 'checkpoints', n: 5, arg: size });
			assert.equal((await finished(srv.client, id)).status, 'completed');
			assert.deepEqual(blobFiles(s.stateDir).map((b) => b.name), [shared]);
			await srv.close();
			srv = await serve(s.cfgPath, s.stateDir);
			const h = await getTask(srv.client, holder);
			assert.equal(h.status, 'working', JSON.stringify(h));
			await call(srv.client, 'durable_task_cancel', { taskId: holder });
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a running task whose checkpoint blob is gone fails with task_lost naming it', async () => {
		const s = setup([bigTool()]);
		let srv = await serve(s.cfgPath, s.stateDir);
		try {
			const id = await start(srv.client, { mode: 'hold', n: 8 << 10 });
			await until(() => blobFiles(s.stateDir).length === 1, 10000, 'the checkpoint');
			const blob = blobFiles(s.stateDir)[0];
			await srv.close();
			fs.unlinkSync(blob.path);
			srv = await serve(s.cfgPath, s.stateDir);
			const t = await getTask(srv.client, id);
			assert.equal(t.status, 'failed', JSON.stringify(t));
			assert.equal(t.error.code, 'task_lost');
			assert.equal(t.error.blob, blob.name);
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a checkpoint of libforkpoint\'s FP_CHECKPOINT_MAX bytes is accepted by the supervisor', async () => {
		const s = setup([bigTool()]);
		const srv = await serve(s.cfgPath, s.stateDir);
		try {
			const id = await start(srv.client, { mode: 'checkpoints', n: 2, arg: (8 << 20) - 4096 });
			const t = await finished(srv.client, id);
			assert.equal(t.status, 'completed', JSON.stringify(t));
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('a checkpoint over maxCheckpointMB fails the task with resource_limit', async () => {
		const s = setup([bigTool('big', { maxCheckpointMB: 1 })]);
		const srv = await serve(s.cfgPath, s.stateDir);
		try {
			const id = await start(srv.client, { mode: 'checkpoints', n: 1, arg: (1 << 20) + 1 });
			const t = await finished(srv.client, id);
			assert.equal(t.status, 'failed', JSON.stringify(t));
			assert.equal(t.error.code, 'resource_limit');
			assert.equal(t.error.limit, 'maxCheckpointMB');
			assert.equal(t.error.limitValue, 1);
		} finally {
			await srv.close();
			s.done();
		}
	});

	it('the state dir disk budget: within it checkpoints come and go, over it the job fails', async () => {
		const s = setup([bigTool()], { stateDirMaxMB: 1 });
		const srv = await serve(s.cfgPath, s.stateDir);
		try {
			const ok = await start(srv.client, { mode: 'checkpoints', n: 20, arg: 300 << 10 });
			const t = await finished(srv.client, ok);
			assert.equal(t.status, 'completed', JSON.stringify(t));
			const over = await start(srv.client, { mode: 'checkpoints', n: 3, arg: 700 << 10 });
			const t2 = await finished(srv.client, over);
			assert.equal(t2.status, 'failed', JSON.stringify(t2));
			assert.equal(t2.error.code, 'resource_limit');
			assert.equal(t2.error.limit, 'stateDirMaxMB');
			assert.match(t2.error.message, /stateDirMaxMB 1/);
		} finally {
			await srv.close();
			s.done();
		}
	});
});
