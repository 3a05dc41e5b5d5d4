// File transfers, artifacts and resources through the real SDK client: a 64 MiB upload with
// wrong offsets, repeated chunks, racing duplicates, reconnects and a SIGKILL of the supervisor
// mid-upload, then commit and download with matching sha256; path escapes refused; a job that
// consumes an uploaded file and produces an artifact that is downloaded and verified; a large
// result replaced by a resource link; resources listed and read; large downloads and artifacts
// hashed off the event loop while other calls answer; NUL in paths refused.
import { test } from 'node:test';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
	assert, BIN, call, checkEnvelope, countTool, envelopeOf, getTask, helper, until, waitTask, writeConfig,
} from './lib.mjs';

const CHUNK = 256 * 1024;
const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

/** A supervisor on a given config and state dir (so a later one can take over the same state). */
async function connect(cfgPath, stateDir) {
	const transport = new StdioClientTransport({
		command: BIN, args: ['mcp', '--config', cfgPath, '--state', stateDir], stderr: 'pipe',
	});
	let stderr = '';
	transport.stderr.on('data', (d) => { stderr += d.toString(); });
	const client = new Client({ name: 'e2e-transfer', version: '1' });
	await client.connect(transport);
	return {
		client,
		pid: transport.pid,
		get stderr() { return stderr; },
		async close() { await client.close().catch(() => {}); },
	};
}

/** A config with a file root at <dir>/data (created first) and the given tools (a config needs one). */
function setup(tools = [countTool()], server = {}) {
	const cfg = writeConfig({ tools, server: { fileRoots: ['./data'], ...server } });
	cfg.data = path.join(cfg.dir, 'data');
	fs.mkdirSync(cfg.data);
	return cfg;
}

function cleanup(cfg) {
	if (!process.env.KEEP_E2E)
		fs.rmSync(cfg.dir, { recursive: true, force: true });
}

async function ok(client, name, args) {
	const res = await call(client, name, args);
	assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.structuredContent).slice(0, 500)}`);
	return res.structuredContent;
}

async function fails(client, name, args, code) {
	const res = await call(client, name, args);
	const e = envelopeOf(res);
	assert.equal(e.code, code, `${name}: expected ${code}, got ${JSON.stringify(e)}`);
	return e;
}

const write = (client, handle, offset, bytes) =>
	call(client, 'file_transfer_write', { handle, offset, data: bytes.toString('base64') });

/** Read a whole download in pieces of `length` bytes; returns the bytes and the eof sha256. */
async function download(client, handle, length) {
	const parts = [];
	let offset = 0;
	for (;;) {
		const r = await ok(client, 'file_transfer_read', { handle, offset, length });
		assert.equal(r.offset, offset);
		parts.push(Buffer.from(r.data, 'base64'));
		offset = r.nextOffset;
		if (r.eof)
			return { bytes: Buffer.concat(parts), sha: r.sha256 };
	}
}

test('64 MiB upload survives wrong offsets, repeats, races, reconnects and a SIGKILL; download matches', async () => {
	const cfg = setup();
	const size = 64 * 1024 * 1024;
	const data = crypto.randomBytes(size);
	const digest = sha256(data);
	let srv = await connect(cfg.cfgPath, cfg.stateDir);
	const t0 = Date.now();
	const stats = { wrong: 0, repeat: 0, race: 0, reconnect: 0, kill: 0 };
	try {
		const open = await ok(srv.client, 'file_transfer_open', { direction: 'upload', path: 'big.bin', size, sha256: digest });
		assert.match(open.handle, /^[0-9a-f]{32}$/);
		assert.equal(open.chunkSize, CHUNK);
		assert.equal(open.nextOffset, 0);
		const handle = open.handle;
		let cursor = 0;
		let n = 0;
		// Interruptions at fixed chunk numbers (plus a few random ones), so every kind happens.
		const plan = new Map([[3, 'wrong'], [9, 'repeat'], [17, 'race'], [40, 'reconnect'], [128, 'kill'],
			[150, 'wrong'], [190, 'race'], [220, 'repeat']]);
		for (let i = 0; i < 6; i++)
			plan.set(41 + Math.floor(Math.random() * 210), ['wrong', 'repeat', 'race'][i % 3]);
		while (cursor < size) {
			n += 1;
			const what = plan.get(n);
			const chunk = data.subarray(cursor, Math.min(size, cursor + CHUNK));
			if (what === 'wrong') {
				stats.wrong++;
				const e = await fails(srv.client, 'file_transfer_write',
					{ handle, offset: cursor + 4096, data: chunk.toString('base64') }, 'offset_mismatch');
				assert.equal(e.partial.cursor, cursor);
				const back = cursor > 0 ? await write(srv.client, handle, 0, data.subarray(0, 1000)) : null;
				if (back)
					assert.equal(envelopeOf(back).partial.cursor, cursor, 'an old offset is refused too');
			}
			if (what === 'race') {
				// Two identical writes in flight at once: exactly one stores the bytes.
				stats.race++;
				const [a, b] = await Promise.all([write(srv.client, handle, cursor, chunk), write(srv.client, handle, cursor, chunk)]);
				assert.ok(!a.isError && !b.isError, `race: ${JSON.stringify([a.structuredContent, b.structuredContent])}`);
				const got = [a.structuredContent, b.structuredContent];
				assert.deepEqual(got.map((r) => r.received).sort((x, y) => x - y), [0, chunk.length]);
				assert.ok(got.every((r) => r.nextOffset === cursor + chunk.length));
				cursor += chunk.length;
				continue;
			}
			if (what === 'kill') {
				// The supervisor dies with a chunk in flight; its answer never comes.
				stats.kill++;
				const inflight = write(srv.client, handle, cursor, chunk).catch((e) => e);
				await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 30)));
				process.kill(srv.pid, 'SIGKILL');
				await inflight;
				await srv.close();
				srv = await connect(cfg.cfgPath, cfg.stateDir);
				const st = await ok(srv.client, 'file_transfer_status', { handle });
				assert.equal(st.status, 'active');
				assert.ok(st.nextOffset === cursor || st.nextOffset === cursor + chunk.length,
					`after the kill the cursor is ${st.nextOffset}, expected ${cursor} or ${cursor + chunk.length}`);
				cursor = st.nextOffset;
				continue;
			}
			const r = await ok(srv.client, 'file_transfer_write', { handle, offset: cursor, data: chunk.toString('base64') });
			assert.equal(r.nextOffset, cursor + chunk.length);
			if (what === 'repeat') {
				// The answer was "lost": the same chunk again is acknowledged as a duplicate.
				stats.repeat++;
				const again = await ok(srv.client, 'file_transfer_write', { handle, offset: cursor, data: chunk.toString('base64') });
				assert.equal(again.duplicate, true);
				assert.equal(again.nextOffset, cursor + chunk.length);
			}
			cursor += chunk.length;
			if (what === 'reconnect') {
				stats.reconnect++;
				await srv.close();
				srv = await connect(cfg.cfgPath, cfg.stateDir);
				// A client that lost the handle gets it back by opening the same path again.
				const again = await ok(srv.client, 'file_transfer_open', { direction: 'upload', path: 'big.bin', size, sha256: digest });
				assert.equal(again.handle, handle);
				assert.equal(again.resumed, true);
				assert.equal(again.nextOffset, cursor);
			}
		}
		const done = await ok(srv.client, 'file_transfer_commit', { handle });
		assert.equal(done.status, 'completed');
		assert.equal(done.size, size);
		assert.equal(done.sha256, digest);
		const onDisk = fs.readFileSync(path.join(cfg.data, 'big.bin'));
		assert.equal(sha256(onDisk), digest, 'the committed file is the original');
		assert.deepEqual(fs.readdirSync(cfg.data), ['big.bin'], 'no staging file left');
		const up = Date.now() - t0;

		const t1 = Date.now();
		const d = await ok(srv.client, 'file_transfer_open', { direction: 'download', path: path.join(cfg.data, 'big.bin') });
		assert.equal(d.size, size);
		assert.equal(d.sha256, digest);
		const back = await download(srv.client, d.handle, 1024 * 1024);
		assert.equal(back.sha, digest);
		assert.equal(sha256(back.bytes), digest, 'downloaded bytes match');
		const down = Date.now() - t1;
		console.log(`# 64 MiB: upload ${(64000 / up).toFixed(1)} MiB/s incl. interruptions ${JSON.stringify(stats)}, `
			+ `download ${(64000 / down).toFixed(1)} MiB/s`);
	} finally {
		await srv.close();
		cleanup(cfg);
	}
});

test('path escapes are refused and name the allowed roots', async () => {
	const cfg = setup();
	fs.writeFileSync(path.join(cfg.dir, 'secret'), 'SECRET');
	fs.symlinkSync(path.join(cfg.dir, 'secret'), path.join(cfg.data, 'link'));
	fs.symlinkSync(cfg.dir, path.join(cfg.data, 'updir'));
	const srv = await connect(cfg.cfgPath, cfg.stateDir);
	try {
		for (const p of ['../secret', path.join(cfg.dir, 'secret'), '/etc/hostname', 'link', 'updir/secret']) {
			const e = await fails(srv.client, 'file_transfer_open', { direction: 'download', path: p }, 'invalid_param');
			assert.equal(e.allowedRoots.length, 1, JSON.stringify(e));
			assert.ok(e.allowedRoots[0].endsWith('/data'), JSON.stringify(e));
			if (p.startsWith('/'))
				assert.ok(e.message.includes(e.allowedRoots[0]), `the message names the roots: ${e.message}`);
		}
		await fails(srv.client, 'file_transfer_open', { direction: 'upload', path: 'updir/evil', size: 1 }, 'invalid_param');
		await fails(srv.client, 'file_transfer_open', { direction: 'download', path: 'nothere.bin' }, 'not_found');
		await fails(srv.client, 'file_transfer_status', { handle: 'f'.repeat(32) }, 'unknown_transfer');
	} finally {
		await srv.close();
		cleanup(cfg);
	}
});

/** Reverse each 4 KiB block, as tests/helpers/copyfile does with "reverse". */
function reverseBlocks(buf) {
	const out = Buffer.from(buf);
	for (let i = 0; i < out.length; i += 4096)
		out.subarray(i, Math.min(out.length, i + 4096)).reverse();
	return out;
}

test('a job consumes an uploaded file and produces an artifact; resources list and read it', async () => {
	const tool = {
		name: 'reverse',
		description: 'Reverses every 4 KiB block of a file.',
		inputSchema: {
			type: 'object',
			properties: { input: { type: 'string', format: 'forkpoint-upload', description: 'upload handle or path' } },
			required: ['input'],
		},
		command: [helper('copyfile'), '{input}', 'out.bin', 'reverse'],
	};
	const cfg = setup([tool, countTool('count', { mode: 'sync' })], { resultInlineBytes: 256 });
	const srv = await connect(cfg.cfgPath, cfg.stateDir);
	try {
		const input = crypto.randomBytes(3 * 1024 * 1024 + 777);
		const want = reverseBlocks(input);
		const o = await ok(srv.client, 'file_transfer_open', { direction: 'upload', path: 'in.dat', size: input.length, sha256: sha256(input) });
		for (let off = 0; off < input.length; off += 1024 * 1024)
			await ok(srv.client, 'file_transfer_write', { handle: o.handle, offset: off, data: input.subarray(off, off + 1024 * 1024).toString('base64') });
		await ok(srv.client, 'file_transfer_commit', { handle: o.handle });

		const h = await ok(srv.client, 'reverse', { input: o.handle });
		// Artifacts over 1 MiB are hashed off the loop: sha256Status is "pending" until then.
		const t = await until(async () => {
			const x = await getTask(srv.client, h.taskId);
			assert.ok(!['failed', 'cancelled'].includes(x.status), JSON.stringify(x));
			return x.status === 'completed' && (x.artifacts || []).every((a) => a.sha256) ? x : null;
		}, 60000, 'the task to complete with its artifacts hashed');
		assert.ok(Array.isArray(t.artifacts), `artifacts in durable_task_get: ${JSON.stringify(t)}`);
		const art = t.artifacts.find((a) => a.name === 'out.bin');
		assert.ok(art, JSON.stringify(t.artifacts));
		assert.equal(art.size, want.length);
		assert.equal(art.sha256, sha256(want));
		assert.equal(art.uri, `forkpoint://tasks/${h.taskId}/artifacts/out.bin`);

		const d = await ok(srv.client, 'file_transfer_open', { direction: 'download', path: art.uri });
		assert.equal(d.sha256, art.sha256);
		const back = await download(srv.client, d.handle, 256 * 1024);
		assert.ok(back.bytes.equals(want), 'the artifact downloaded is what the job computed');

		// resources
		const all = [];
		let cursor;
		do {
			const page = await srv.client.listResources(cursor ? { cursor } : undefined);
			all.push(...page.resources);
			cursor = page.nextCursor;
		} while (cursor);
		const uris = all.map((r) => r.uri);
		for (const u of ['result', 'log', 'artifacts/out.bin'])
			assert.ok(uris.includes(`forkpoint://tasks/${h.taskId}/${u}`), `${u} listed: ${JSON.stringify(uris)}`);
		const tpl = await srv.client.listResourceTemplates();
		assert.deepEqual(tpl.resourceTemplates.map((x) => x.uriTemplate).sort(), [
			'forkpoint://tasks/{taskId}/artifacts/{name}', 'forkpoint://tasks/{taskId}/log', 'forkpoint://tasks/{taskId}/result']);
		const res = await srv.client.readResource({ uri: `forkpoint://tasks/${h.taskId}/result` });
		assert.equal(res.contents[0].mimeType, 'application/json');
		assert.equal(JSON.parse(res.contents[0].text).exitCode, 0);
		const log = await srv.client.readResource({ uri: `forkpoint://tasks/${h.taskId}/log` });
		assert.match(log.contents[0].text, /copied 3146505 bytes/);
		const blob = await srv.client.readResource({ uri: art.uri });
		assert.ok(Buffer.from(blob.contents[0].blob, 'base64').equals(want), 'the artifact read as a resource blob');
		await assert.rejects(srv.client.readResource({ uri: `forkpoint://tasks/${'0'.repeat(32)}/result` }),
			(e) => e.code === -32002);
		await assert.rejects(srv.client.readResource({ uri: 'forkpoint://nonsense' }), (e) => e.code === -32602);

		// A result over resultInlineBytes comes back as a summary and a resource link.
		const big = await call(srv.client, 'count', { n: 200 });
		assert.ok(!big.isError, JSON.stringify(big));
		const link = big.content.find((c) => c.type === 'resource_link');
		assert.ok(link, `resource_link in ${JSON.stringify(big.content).slice(0, 400)}`);
		assert.match(link.uri, /^forkpoint:\/\/tasks\/[0-9a-f]{32}\/result$/);
		const full = await srv.client.readResource({ uri: link.uri });
		assert.match(JSON.parse(full.contents[0].text).output, /200/);

		// An input that is not a committed upload fails the task with an envelope naming it.
		const o2 = await ok(srv.client, 'file_transfer_open', { direction: 'upload', path: 'half.dat', size: 10 });
		const h2 = await ok(srv.client, 'reverse', { input: o2.handle });
		const t2 = await until(async () => {
			const r = await ok(srv.client, 'durable_task_get', { taskId: h2.taskId });
			return r.status === 'failed' ? r : null;
		}, 30000, 'the task with an uncommitted input to fail');
		checkEnvelope(t2.error);
		assert.equal(t2.error.code, 'not_active');
		assert.equal(t2.error.param, 'input');
	} finally {
		await srv.close();
		cleanup(cfg);
	}
});

test('a 2000 MiB sparse download is hashed off the loop; paths with NUL are refused', async () => {
	const cfg = setup();
	const big = path.join(cfg.data, 'sparse.bin');
	const fd = fs.openSync(big, 'w');
	fs.ftruncateSync(fd, 2000 * 1024 * 1024);
	fs.writeSync(fd, 'tail', 2000 * 1024 * 1024 - 4);
	fs.closeSync(fd);
	fs.writeFileSync(path.join(cfg.data, 'ok.txt'), 'ok');
	const srv = await connect(cfg.cfgPath, cfg.stateDir);
	try {
		const t0 = performance.now();
		let openedAt = 0;
		const opening = ok(srv.client, 'file_transfer_open', { direction: 'download', path: 'sparse.bin' })
			.then((r) => { openedAt = performance.now(); return r; });
		// Other requests are answered while the hash runs.
		const quick = [];
		for (let i = 0; i < 5; i++) {
			const s0 = performance.now();
			await fails(srv.client, 'file_transfer_status', { handle: 'e'.repeat(32) }, 'unknown_transfer');
			quick.push(performance.now() - s0);
		}
		const quickDone = performance.now();
		const o = await opening;
		assert.equal(o.size, 2000 * 1024 * 1024);
		assert.match(o.sha256, /^[0-9a-f]{64}$/);
		const worst = Math.max(...quick);
		console.log(`# 2000 MiB sparse download open answered after ${(openedAt - t0).toFixed(0)} ms; ` +
			`5 status calls meanwhile, slowest ${worst.toFixed(1)} ms`);
		if (openedAt - t0 > 200)
			assert.ok(quickDone < openedAt, 'the status calls were answered before the open');
		const r = await ok(srv.client, 'file_transfer_read', { handle: o.handle, offset: 2000 * 1024 * 1024 - 4, length: 4 });
		assert.equal(Buffer.from(r.data, 'base64').toString(), 'tail');

		// "ok.txt\u0000../x" must not be read as "ok.txt".
		await assert.rejects(call(srv.client, 'file_transfer_open', { direction: 'download', path: 'ok.txt\u0000../x' }),
			(e) => e.code === -32602 && /NUL/.test(e.message));
		await assert.rejects(srv.client.readResource({ uri: `forkpoint://tasks/${'0'.repeat(32)}/artifacts/a\u0000b` }),
			(e) => e.code === -32602);
	} finally {
		await srv.close();
		cleanup(cfg);
	}
});

test('1 GiB of sparse artifacts is hashed off the loop: durable_task_get answers meanwhile', async () => {
	const tool = {
		name: 'sparse4',
		description: 'Leaves four 256 MiB sparse files in outputs/.',
		inputSchema: { type: 'object', properties: {} },
		command: ['/bin/sh', '-c', 'for i in 1 2 3 4; do truncate -s 268435456 "$FORKPOINT_WORKDIR/outputs/a$i.bin" || exit 1; done'],
		sandbox: { profile: 'none' },
	};
	const cfg = setup([tool]);
	const srv = await connect(cfg.cfgPath, cfg.stateDir);
	try {
		const h = await ok(srv.client, 'sparse4', {});
		let worst = 0, polls = 0, sawPending = false;
		const t0 = performance.now();
		const t = await until(async () => {
			const p0 = performance.now();
			const x = await getTask(srv.client, h.taskId);
			worst = Math.max(worst, performance.now() - p0);
			polls++;
			assert.ok(!['failed', 'cancelled'].includes(x.status), JSON.stringify(x));
			if (x.status === 'completed' && (x.artifacts || []).some((a) => a.sha256Status === 'pending'))
				sawPending = true;
			return x.status === 'completed' && x.artifacts && x.artifacts.every((a) => a.sha256) ? x : null;
		}, 120000, 'the four artifacts to be hashed', 50);
		const zeros = crypto.createHash('sha256');
		const mib = Buffer.alloc(1 << 20);
		for (let i = 0; i < 256; i++)
			zeros.update(mib);
		const want = zeros.digest('hex');
		assert.equal(t.artifacts.length, 4);
		for (const a of t.artifacts) {
			assert.equal(a.size, 268435456);
			assert.equal(a.sha256, want);
		}
		console.log(`# 4 x 256 MiB sparse artifacts: all hashed after ${(performance.now() - t0).toFixed(0)} ms; ` +
			`${polls} durable_task_get polls meanwhile, slowest ${worst.toFixed(1)} ms${sawPending ? ' (saw sha256Status pending)' : ''}`);
		assert.ok(worst < 1000, `durable_task_get took ${worst.toFixed(0)} ms while the artifacts were hashed`);
	} finally {
		await srv.close();
		cleanup(cfg);
	}
});
