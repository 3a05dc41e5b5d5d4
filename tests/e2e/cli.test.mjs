// The command line as a person uses it: forkpoint call / --task, ls, show, logs, fsck, exit codes,
// one server per state dir, and a damaged journal refused with file and offset.
import { describe, it } from 'node:test';
import { spawnSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { assert, BIN, writeConfig, reportTool, countTool } from './lib.mjs';

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
		assert.equal(run(['show', ...st]).status, 2);
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
