// The command line as a person uses it: forkpoint call / --task, ls, show, logs, fsck, exit codes,
// one server per state dir, a damaged journal refused with file and offset, and job text that
// tries to drive the terminal shown escaped (unless --raw).
import { describe, it } from 'node:test';
import { spawnSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { assert, BIN, writeConfig, reportTool, countTool, until } from './lib.mjs';

const run = (args, opts = {}) => spawnSync(BIN, args, { encoding: 'utf8', timeout: 60000, ...opts });

describe('command line', () => {
	const { cfgPath, stateDir } = writeConfig({ tools: [reportTool('report'), countTool('count', { mode: 'sync' })] });
	const st = ['--state', stateDir];

	it('--version, --help, usage errors exit 0/0/2', () => {
		assert.match(run(['--version']).stdout, /^forkpoint \d+\.\d+\.\d+/);
		const h = run(['--help']);
		assert.equal(h.status, 0);
		for (const c of ['mcp', 'call', 'ls', 'show', 'logs', 'fsck']) assert.match(h.stdout, new RegExp(`\\b${c}\\b`));
		assert.equal(run(['frobnicate']).status, 2);
		assert.equal(run(['mcp']).status, 2, 'mcp without --config');
		assert.equal(run(['call', '--config', cfgPath]).status, 2, 'call without TOOL');
		const bad = run(['call', 'count', 'not json', '--config', cfgPath, ...st]);
		assert.equal(bad.status, 2);
		assert.match(bad.stderr, /JSON object/);
	});

	it('call runs a task to completion and prints its result; a failure exits 1', () => {
		const r = run(['call', 'report', '{"topic":"cli","sections":2,"delayMs":50}', '--config', cfgPath, ...st]);
		assert.equal(r.status, 0, r.stderr);
		const out = JSON.parse(r.stdout);
		assert.equal(out.topic, 'cli');
		assert.match(r.stderr, /task [0-9a-f]{32} started/);
		assert.match(r.stderr, /progress/);
		const f = run(['call', 'report', '{"topic":"x","sections":2,"delayMs":10,"failAt":2}', '--config', cfgPath, ...st]);
		assert.equal(f.status, 1);
		assert.equal(JSON.parse(f.stdout).error.code, 'job_failed');
		const s = run(['call', 'count', '{"n":2}', '--config', cfgPath, ...st]);
		assert.equal(s.status, 0, s.stderr);
		assert.equal(JSON.parse(s.stdout).exitCode, 0);
		const inv = run(['call', 'report', '{"sections":2}', '--config', cfgPath, ...st]);
		assert.equal(inv.status, 1);
		assert.equal(JSON.parse(inv.stdout).error.code, 'invalid_arguments');
	});

	it('ls, show (by prefix) and logs read the state', () => {
		const ls = run(['ls', ...st]);
		assert.equal(ls.status, 0);
		const rows = ls.stdout.trim().split('\n');
		assert.match(rows[0], /^ID\s+TOOL\s+STATUS\s+PROGRESS\s+AGE/);
		const done = rows.find((l) => /\breport\b.*\bcompleted\b/.test(l));
		assert.ok(done, ls.stdout);
		const id = done.split(/\s+/)[0];
		const show = run(['show', id.slice(0, 8), ...st]);
		assert.equal(show.status, 0, show.stderr);
		assert.match(show.stdout, new RegExp(`task\\s+${id}`));
		assert.match(show.stdout, /status\s+completed/);
		assert.match(show.stdout, /timeline[\s\S]*created[\s\S]*started[\s\S]*checkpoint[\s\S]*finished/);
		assert.match(show.stdout, /sandbox/);
		const logs = run(['logs', id, ...st]);
		assert.equal(logs.status, 0);
		assert.match(logs.stdout, /section 2\/2 written/);
		assert.equal(run(['show', 'ffff', ...st]).status, 1);
		const short = run(['show', '0', ...st]);
		assert.equal(short.status, 1);
		assert.match(short.stderr, /at least 4 characters/);
		assert.equal(run(['show', ...st]).status, 2);
	});

	it('ls before the first task: "no tasks yet", exit 0', () => {
		const missing = path.join(path.dirname(stateDir), 'never-used-state');
		const ls = run(['ls', '--state', missing]);
		assert.equal(ls.status, 0, ls.stderr);
		assert.match(ls.stdout, /no tasks yet/);
		assert.equal(fs.existsSync(missing), false, 'ls must not create the state dir');
	});

	it('one server per state dir: a second one refuses with the owner', async () => {
		const first = spawn(BIN, ['mcp', '--config', cfgPath, ...st], { stdio: ['pipe', 'pipe', 'pipe'] });
		let err = '';
		first.stderr.on('data', (d) => { err += d; });
		await new Promise((res, rej) => {
			const t = setTimeout(() => rej(new Error(`first server did not start: ${err}`)), 10000);
			first.stderr.on('data', () => { if (/serving/.test(err)) { clearTimeout(t); res(); } });
		});
		const second = run(['mcp', '--config', cfgPath, ...st], { input: '' });
		assert.equal(second.status, 1);
		assert.match(second.stderr, new RegExp(`in use by another forkpoint \\(pid ${first.pid}\\)`));
		// Readers work while it runs.
		assert.equal(run(['ls', ...st]).status, 0);
		first.stdin.end();
		const code = await new Promise((res) => first.on('exit', res));
		assert.equal(code, 0);
	});

	it('fsck: clean, then a flipped byte in an old segment is refused with file and offset', () => {
		const ok = run(['fsck', ...st]);
		assert.equal(ok.status, 0, ok.stderr);
		assert.match(ok.stdout, /all checksums good/);
		// Make the damaged segment an old one: one more server run rolls nothing, so copy the
		// state and corrupt a record in the middle of its only segment, followed by valid ones.
		const copy = `${stateDir}-damaged`;
		fs.cpSync(stateDir, copy, { recursive: true });
		const jdir = path.join(copy, 'journal');
		const seg = fs.readdirSync(jdir).filter((f) => f.endsWith('.seg')).sort()[0];
		const p = path.join(jdir, seg);
		const buf = fs.readFileSync(p);
		const at = Math.floor(buf.length / 3);
		buf[at] ^= 0x40;
		fs.writeFileSync(p, buf);
		const bad = run(['fsck', '--state', copy]);
		assert.equal(bad.status, 1);
		assert.match(bad.stderr, new RegExp(`${seg}.*offset \\d+|offset \\d+.*${seg}`));
		const srv = run(['mcp', '--config', cfgPath, '--state', copy], { input: '' });
		assert.equal(srv.status, 1, 'a damaged journal must stop start-up');
		assert.match(srv.stderr, /offset \d+/);
		const rep = run(['fsck', '--repair', '--state', copy]);
		assert.equal(rep.status, 1, 'damage in the middle is never repaired silently');
		fs.rmSync(copy, { recursive: true, force: true });
	});
});

// Bytes that would act on a terminal: C0 controls but \n and \t, DEL, C1 (as UTF-8), bidi
// controls, and anything that is not valid UTF-8.  Returns a description of the first, or null.
function unsafeIn(buf) {
	let text;
	try {
		text = new TextDecoder('utf-8', { fatal: true }).decode(buf);
	} catch {
		return 'invalid UTF-8';
	}
	const m = text.match(/[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]/u);
	return m ? `U+${m[0].codePointAt(0).toString(16).padStart(4, '0')} at ${m.index}` : null;
}

describe('job text that tries to drive the terminal', () => {
	// A title change, an OSC 52 clipboard write, a screen clear, a carriage return and a fake
	// sudo prompt, a C1 CSI, a bidi override and an invalid byte: in the log, in progress, in
	// a question, in a failure message and in the result.
	const evil = String.raw`\033]0;pwned\007 \033]52;c;ZXZpbA==\007 \033[2J\033[H\r[sudo] password for root: \302\233 31m \342\200\256 \377`;
	// After the progress the job waits for the test to have seen it (a file in its work dir).
	const script = String.raw`printf '${evil}\n'; forkpoint-job progress 0.5 "$(printf '${evil}')";
		while [ ! -e go ]; do sleep 0.05; done;
		a=$(forkpoint-job ask "$(printf '\r[sudo] password for root:')" yes no);
		forkpoint-job result "$(printf '{"t":"\\u001b]0;x\\u0007 \302\233 \342\200\256","a":"%s"}' "$a")"`;
	const failScript = String.raw`forkpoint-job fail "$(printf 'boom \033]0;t\007 \342\200\256')"`;
	const tools = [
		{ name: 'evil', description: 'Hostile text.', inputSchema: { type: 'object' }, command: ['/bin/sh', '-c', script] },
		{ name: 'evilfail', description: 'Hostile failure.', inputSchema: { type: 'object' }, command: ['/bin/sh', '-c', failScript] },
	];
	const { cfgPath, stateDir } = writeConfig({ tools });
	const st = ['--state', stateDir];
	// No controlling terminal (detached: a new session), so call asks on stdin.
	const runB = (args, opts = {}) => spawnSync(BIN, args, { timeout: 60000, detached: true, ...opts });
	let id;

	// `call evil` answering the question with `answer`; lets the job go on once the progress
	// line is on stderr, and runs whileAsking(id) once the question is.  Resolves to
	// {status, stdout, stderr (Buffers), id}.
	async function callEvil(extra, answer, whileAsking) {
		const p = spawn(BIN, ['call', 'evil', '{}', ...extra, '--config', cfgPath, ...st],
			{ detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
		const out = [], err = [];
		p.stdout.on('data', (d) => out.push(d));
		p.stderr.on('data', (d) => err.push(d));
		const exited = new Promise((res) => p.on('exit', (code) => res(code)));
		try {
			const started = await until(() => Buffer.concat(err).toString().match(/task ([0-9a-f]{32}) started/),
				20000, 'the task to start');
			await until(() => /progress\s+50%/.test(Buffer.concat(err).toString()), 20000, 'the progress line');
			fs.writeFileSync(path.join(stateDir, 'tasks', started[1], 'work', 'go'), '');
			await until(() => /password for root:.*\[yes\/no\]/.test(Buffer.concat(err).toString()), 20000, 'the question');
			whileAsking?.(started[1]);
			p.stdin.end(`${answer}\n`);
			const status = await exited;
			return { status, stdout: Buffer.concat(out), stderr: Buffer.concat(err), id: started[1] };
		} finally {
			p.kill('SIGKILL');
		}
	}

	let asking;
	it('call: progress, the question and the failure on stderr, the result on stdout, all escaped', async () => {
		const r = await callEvil([], 'yes', (tid) => { asking = runB(['show', tid, ...st]); });
		assert.equal(r.status, 0, r.stderr.toString());
		assert.equal(unsafeIn(r.stdout), null, r.stdout.toString());
		assert.equal(unsafeIn(r.stderr), null, r.stderr.toString());
		// JSON escapes: the value is the job's, byte for byte.
		assert.deepEqual(JSON.parse(r.stdout), { t: '\x1b]0;x\x07 \u009b \u202e', a: 'yes' });
		assert.match(r.stdout.toString(), /\\u009b \\u202e/);
		const err = r.stderr.toString();
		assert.match(err, /\? \\x0d\[sudo\] password for root: \[yes\/no\]/, 'the prompt cannot draw over its line');
		assert.match(err, /progress  50% \\x1b\]0;pwned\\x07 \\x1b\]52;c;ZXZpbA==\\x07 \\x1b\[2J\\x1b\[H\\x0d\[sudo\]/);
		id = r.id;
		const f = runB(['call', 'evilfail', '{}', '--config', cfgPath, ...st]);
		assert.equal(f.status, 1);
		assert.equal(unsafeIn(f.stderr), null, f.stderr.toString());
		assert.match(f.stderr.toString(), /task [0-9a-f]{32} failed/);
		assert.equal(unsafeIn(f.stdout), null, f.stdout.toString());
		assert.match(f.stdout.toString(), /"boom \\u001b\]0;t\\u0007 \\u202e"/);
		assert.equal(JSON.parse(f.stdout).error.message, 'boom \x1b]0;t\x07 \u202e');
	});

	it('call --raw prints the job text as it is', async () => {
		const r = await callEvil(['--raw'], 'no');
		assert.equal(r.status, 0, r.stderr.toString());
		assert.ok(r.stdout.includes(Buffer.from('\u009b \u202e')), r.stdout.toString());
		assert.ok(r.stderr.includes(Buffer.from('\x1b]52;c;')), 'raw progress on stderr');
	});

	it('call: a number picks the numbered choice; a wrong answer re-asks with the hint in the prompt', async () => {
		const r = await callEvil([], 'maybe\n2');
		assert.equal(r.status, 0, r.stderr.toString());
		assert.equal(JSON.parse(r.stdout).a, 'no');
		assert.match(r.stderr.toString(), /\[yes\/no\] \(answer one of the choices, or its number 1-2\)/);
	});

	it('logs: escaped in a pipe, newlines kept; --raw gives the bytes', () => {
		const r = runB(['logs', id, ...st]);
		assert.equal(r.status, 0, r.stderr.toString());
		assert.equal(unsafeIn(r.stdout), null, r.stdout.toString());
		assert.equal(r.stdout.toString(),
			String.raw`\x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b[H\x0d[sudo] password for root: \u009b 31m \u202e \xff` + '\n');
		const raw = runB(['logs', id, '--raw', ...st]);
		assert.equal(raw.status, 0);
		assert.deepEqual(raw.stdout, Buffer.concat([
			Buffer.from('\x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b[H\r[sudo] password for root: \u009b 31m \u202e ', 'utf8'),
			Buffer.from([0xff, 0x0a])]));
	});

	it('show and ls: escaped; show --raw as it is', () => {
		assert.equal(asking.status, 0, asking.stderr.toString());
		assert.equal(unsafeIn(asking.stdout), null, asking.stdout.toString());
		assert.match(asking.stdout.toString(), /question\s+\[q-[0-9a-f]{16}\] \\x0d\[sudo\] password for root:\n/);
		const s = runB(['show', id, ...st]);
		assert.equal(s.status, 0, s.stderr.toString());
		assert.equal(unsafeIn(s.stdout), null, s.stdout.toString());
		const out = s.stdout.toString();
		assert.match(out, /progress\s+\[##########\] 100% \\x1b\]0;pwned\\x07 \\x1b\]52;c;ZXZpbA==\\x07 \\x1b\[2J\\x1b\[H\\x0d\[sudo\]/);
		assert.match(out, /"t":\s+"\\u001b\]0;x\\u0007 \\u009b \\u202e"/);
		const raw = runB(['show', id, '--raw', ...st]);
		assert.equal(raw.status, 0);
		assert.ok(raw.stdout.includes(Buffer.from('\x1b]52;c;')), 'raw progress message');
		const ls = runB(['ls', ...st]);
		assert.equal(ls.status, 0);
		assert.equal(unsafeIn(ls.stdout), null);
		assert.match(ls.stdout.toString(), /\bevil\b.*\bcompleted\b/);
	});
});
