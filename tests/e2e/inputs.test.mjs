// A job's input files are copied into its work folder by the worker pool before the job starts.
// A copy that fails (the state dir's file system is full: a 4 MiB tmpfs in a private mount
// namespace, as root) fails the task with internal_error naming the argument and leaves no
// partial file behind; the server keeps answering, and the next task, with a file that fits,
// gets its copy and runs.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { BIN, RawServer, assert, example, rawToolResult, until, writeConfig } from './lib.mjs';

const takesTool = {
	name: 'takes',
	description: 'Takes a file (copied into its work folder), prints one line.',
	mode: 'task',
	inputSchema: {
		type: 'object',
		properties: { file: { type: 'string', format: 'forkpoint-upload' } },
		required: ['file'],
	},
	command: [example('plain-count'), '1', '0'],
};

function skipReason() {
	if (process.getuid?.() !== 0)
		return 'needs root (a tmpfs mounted in a private mount namespace)';
	const probe = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c',
		'mount -t tmpfs -o size=1m fpprobe /mnt && umount /mnt'], { encoding: 'utf8' });
	if (probe.status !== 0)
		return `cannot mount a tmpfs in a private mount namespace: ${(probe.stderr || probe.error || '').toString().trim()}`;
	return false;
}
const skip = skipReason();
if (skip)
	console.log(`# input copy fault tests skipped: ${skip}`);

/** The task's status view, through durable_task_get. */
async function getTask(raw, id) {
	const r = await raw.request(`get-${id}-${Date.now()}-${Math.random()}`, 'tools/call',
		{ name: 'durable_task_get', arguments: { taskId: id } });
	return rawToolResult(r).structuredContent;
}

describe('input copies', { skip }, () => {
	let raw;
	let dir;
	after(async () => {
		await raw?.kill();
		if (dir && !process.env.KEEP_E2E)
			fs.rmSync(dir, { recursive: true, force: true });
	});

	it('a copy that does not fit fails its task with internal_error naming the argument', async () => {
		const w = writeConfig({ tools: [takesTool], server: { fileRoots: ['./data'] } });
		dir = w.dir;
		const data = path.join(dir, 'data');
		fs.mkdirSync(data);
		fs.writeFileSync(path.join(data, 'big.bin'), Buffer.alloc(8 << 20, 0x62));
		fs.writeFileSync(path.join(data, 'small.bin'), Buffer.alloc(64 << 10, 0x73));
		raw = new RawServer({
			command: 'unshare',
			args: ['-m', '--propagation', 'private', 'sh', '-c',
				'mount -t tmpfs -o size=4m,mode=0700 fpstate "$0" && exec "$@"',
				w.stateDir, BIN, 'mcp', '--config', w.cfgPath, '--state', w.stateDir],
		});
		const state = () => path.join(`/proc/${raw.proc.pid}/root`, w.stateDir);
		await raw.initialize();

		const big = rawToolResult(await raw.request('big', 'tools/call',
			{ name: 'takes', arguments: { file: 'big.bin' } })).structuredContent;
		let t;
		await until(async () => (t = await getTask(raw, big.taskId)).status !== 'working', 20000, 'the big task ends');
		assert.equal(t.status, 'failed', JSON.stringify(t));
		assert.equal(t.error.code, 'internal_error', JSON.stringify(t.error));
		assert.equal(t.error.retryable, true);
		assert.match(t.error.message, /argument file could not be copied into the job's folder: No space left/);
		const inputs = path.join(state(), 'tasks', big.taskId, 'work', 'inputs', 'file');
		assert.deepEqual(fs.existsSync(inputs) ? fs.readdirSync(inputs) : [], [], 'no partial copy is left');

		const ping = await raw.request('ping', 'ping', undefined, { timeoutMs: 2000 });
		assert.deepEqual(ping.result, {});
		const small = rawToolResult(await raw.request('small', 'tools/call',
			{ name: 'takes', arguments: { file: 'small.bin' } })).structuredContent;
		await until(async () => (t = await getTask(raw, small.taskId)).status !== 'working', 20000, 'the small task ends');
		assert.equal(t.status, 'completed', JSON.stringify(t));
		const copy = path.join(state(), 'tasks', small.taskId, 'work', 'inputs', 'file', 'small.bin');
		assert.equal(fs.statSync(copy).size, 64 << 10, 'the file that fits was copied whole');
	});
});
