// The event loop stays responsive while blocking file work runs on the worker pool: `ping`
// answers within 50 ms (p99; p50 and the worst are printed too) while a 2 GiB sparse file is
// hashed for a download, while two jobs store 100 MiB of checkpoints each (13 of nearly 8 MiB,
// the most one checkpoint may be, each a blob that is hashed, written and synced before it is
// recorded), and while a job's 256 MiB input file is copied into its work folder.  Done on the
// loop instead, each of those steps holds every answer back for its whole length: seconds for
// the hash and the copy, tens of milliseconds for each checkpoint.
import { describe, it } from 'node:test';
import fs from 'node:fs';
import path from 'node:path';
import {
	assert, call, example, getTask, helper, startServer, TERMINAL,
} from './lib.mjs';

// A sanitizer build does the loop's own work (reading 8 MiB frames, copying them) a few times
// slower; the work this test is about stays off the loop either way.
const LIMIT_MS = (process.env.BUILD ?? '').includes('san') ? 150 : 50;
const PING_EVERY_MS = 5;
const ATTEMPTS = 3;
const SPARSE_BYTES = 2048 * 1024 * 1024;
const CKPT_BYTES = (8 << 20) - 8192;   // what a start frame can still carry back, with the arguments
const CKPT_COUNT = 13;                 // 13 x ~8 MiB: 100 MiB of checkpoints per job
const JOBS = 2;
const INPUT_BYTES = 256 * 1024 * 1024;

const bigTool = {
	name: 'big',
	description: 'Test helper bigresult.',
	inputSchema: {
		type: 'object',
		properties: { mode: { type: 'string' }, n: { type: 'integer' }, arg: { type: 'integer', default: 0 } },
		required: ['mode', 'n'],
	},
	command: [helper('bigresult'), '{mode}', '{n}', '{arg}'],
	sandbox: { profile: 'none' },
};

const inputTool = {
	name: 'takes',
	description: 'Takes a file (copied into its work folder), prints one line.',
	inputSchema: {
		type: 'object',
		properties: { file: { type: 'string', format: 'forkpoint-upload' } },
		required: ['file'],
	},
	command: [example('plain-count'), '1', '0'],
};

/** Poll the task through the loop (each poll is one more request answered) until it ends. */
async function finished(client, id) {
	for (;;) {
		const t = await getTask(client, id);
		if (TERMINAL.has(t.status))
			return t;
		await new Promise((r) => setTimeout(r, 50));
	}
}

/** Send a ping every PING_EVERY_MS until work settles, each on its own (not waiting for the
 *  one before: a stalled loop then delays every ping sent during the stall, as it delays every
 *  client); returns the round trips in ms of the pings sent before it settled, and work's
 *  value. */
async function pingDuring(client, work) {
	const pings = [];
	let settled = false;
	const w = work.finally(() => { settled = true; });
	while (!settled) {
		const t0 = performance.now();
		pings.push(client.ping().then((r) => {
			assert.deepEqual(r, {});
			return performance.now() - t0;
		}));
		await Promise.race([w.catch(() => {}), new Promise((r) => setTimeout(r, PING_EVERY_MS))]);
	}
	return { rtts: await Promise.all(pings), value: await w };
}

function summary(rtts) {
	const s = [...rtts].sort((a, b) => a - b);
	const p99 = s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)];
	return { n: s.length, p50: s[Math.floor(s.length / 2)], p99, max: s[s.length - 1] };
}

function report(what, st, ms) {
	console.log(`# ${what}: ${st.n} pings in ${ms.toFixed(0)} ms; p50 ${st.p50.toFixed(1)} ms, ` +
		`p99 ${st.p99.toFixed(1)} ms, max ${st.max.toFixed(1)} ms`);
}

/** Run a scenario (a fresh server each time; it returns the ping summary) and check it.  A
 *  p99 over the limit is measured again, up to ATTEMPTS times in all, before the test fails: a
 *  busy host can hold any process back now and then, but work done on the loop holds it back
 *  every time (done inline, the checkpoints alone give a p99 over 120 ms). */
async function measured(what, scenario) {
	let st;
	for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
		st = await scenario();
		if (st.n >= 20 && st.p99 <= LIMIT_MS)
			return;
		console.log(`# ${what}: attempt ${attempt} over the limit`);
	}
	assert.ok(st.n >= 20, `${what}: only ${st.n} pings were answered while the work ran`);
	assert.ok(st.p99 <= LIMIT_MS, `${what}: ping p99 ${st.p99.toFixed(1)} ms is over ${LIMIT_MS} ms ` +
		`(max ${st.max.toFixed(1)} ms) in ${ATTEMPTS} runs: blocking work is being done on the event loop`);
}

describe('the loop answers while the pool works', () => {
	it(`ping within ${LIMIT_MS} ms while a 2 GiB sparse file is hashed for a download`, () => measured('download hash', async () => {
		const srv = await startServer({ tools: [bigTool], server: { fileRoots: ['./data'] }, env: process.env });
		try {
			const data = path.join(srv.dir, 'data');
			fs.mkdirSync(data);
			const fd = fs.openSync(path.join(data, 'sparse.bin'), 'w');
			fs.ftruncateSync(fd, SPARSE_BYTES);
			fs.closeSync(fd);
			const t0 = performance.now();
			const { rtts, value } = await pingDuring(srv.client,
				call(srv.client, 'file_transfer_open', { direction: 'download', path: 'sparse.bin' }));
			assert.ok(!value.isError, JSON.stringify(value.structuredContent));
			assert.equal(value.structuredContent.size, SPARSE_BYTES);
			const st = summary(rtts);
			report('2 GiB sparse download open', st, performance.now() - t0);
			return st;
		} finally {
			await srv.close();
		}
	}));

	it(`ping within ${LIMIT_MS} ms while ${JOBS} jobs store ${CKPT_COUNT} checkpoints of ~8 MiB each`, () => measured('checkpoint writes', async () => {
		const srv = await startServer({ tools: [bigTool], server: { maxConcurrent: JOBS }, env: process.env });
		try {
			const t0 = performance.now();
			const ids = [];
			for (let i = 0; i < JOBS; i++) {
				// Different sizes, so no two checkpoints share a blob.
				const res = await call(srv.client, 'big', { mode: 'checkpoints', n: CKPT_COUNT, arg: CKPT_BYTES - i });
				assert.ok(!res.isError, JSON.stringify(res.structuredContent));
				ids.push(res.structuredContent.taskId);
			}
			// Each job waits for a checkpoint's acknowledgement before it sends the next, so a
			// task ends only after its last checkpoint is durable.
			const { rtts, value: done } = await pingDuring(srv.client,
				Promise.all(ids.map((id) => finished(srv.client, id))));
			for (const t of done) {
				assert.equal(t.status, 'completed', JSON.stringify(t));
				assert.equal(t.result.checkpoints, CKPT_COUNT);
			}
			const st = summary(rtts);
			report(`${JOBS} x ${CKPT_COUNT} x ${(CKPT_BYTES / 1048576).toFixed(2)} MiB checkpoints`, st,
				performance.now() - t0);
			return st;
		} finally {
			await srv.close();
		}
	}));

	it(`ping within ${LIMIT_MS} ms while a job's 256 MiB input file is copied into its folder`, () => measured('input copy', async () => {
		const srv = await startServer({ tools: [inputTool], server: { fileRoots: ['./data'] }, env: process.env });
		try {
			const data = path.join(srv.dir, 'data');
			fs.mkdirSync(data);
			const fd = fs.openSync(path.join(data, 'input.bin'), 'w');
			fs.ftruncateSync(fd, INPUT_BYTES);
			fs.closeSync(fd);
			const t0 = performance.now();
			let id;
			// From the call on (the copy may begin while the call is being answered): the job
			// starts once its copy is made, and ends at once.
			const { rtts, value: t } = await pingDuring(srv.client,
				call(srv.client, 'takes', { file: 'input.bin' }).then((res) => {
					assert.ok(!res.isError, JSON.stringify(res.structuredContent));
					id = res.structuredContent.taskId;
					return finished(srv.client, id);
				}));
			assert.equal(t.status, 'completed', JSON.stringify(t));
			const copy = fs.statSync(path.join(srv.stateDir, 'tasks', id, 'work', 'inputs', 'file', 'input.bin'));
			assert.equal(copy.size, INPUT_BYTES, 'the job got the whole file');
			const st = summary(rtts);
			report('256 MiB input copy', st, performance.now() - t0);
			return st;
		} finally {
			await srv.close();
		}
	}));
});
