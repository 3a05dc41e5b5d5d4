// Small helpers for run.sh.
//
//   node util.mjs port                   a free TCP port on 127.0.0.1
//   node util.mjs wait URL SECONDS       until URL answers HTTP at all (exit 1 on timeout)
//   node util.mjs report EXPECTED RAN [PREFIX=]DIR...
//                                        per-scenario verdicts from the suites' checks.json
//                                        files under each DIR (named PREFIX + scenario, so the
//                                        same scenario run by two suites stays two entries),
//                                        compared with EXPECTED; RAN lists (one per line) the
//                                        scenarios that were started, with their prefixes
//
// report prints one line per scenario (ok / FAIL / xfail / XPASS / skip), the failed checks of
// every unexpected failure, and last "N passed, M failed" where M counts unexpected failures.
// It exits 1 when M > 0.  A started scenario without results (its run crashed) failed.  A
// scenario passes when none of its checks is a FAILURE; one whose checks are all SKIPPED or
// INFO is a skip.  EXPECTED has one entry per line, then the reason; '#' at the start of a
// line or after a space starts a comment.  An
// entry is a scenario ("2026-07-28/caching": any failing check is expected) or one check of it
// ("2026-07-28/server-stateless#sep-2575-http-server-header-mismatch-400"): the scenario is
// then an expected failure only while every check that fails is listed, and a listed check
// that passes is reported as XPASS.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const [cmd, ...args] = process.argv.slice(2);

function freePort() {
	const srv = net.createServer();
	srv.listen(0, '127.0.0.1', () => {
		const { port } = srv.address();
		srv.close(() => console.log(port));
	});
}

async function waitFor(url, seconds) {
	const end = Date.now() + seconds * 1000;
	while (Date.now() < end) {
		try {
			await fetch(url, { method: 'GET', signal: AbortSignal.timeout(1000) });
			return;
		} catch {
			await new Promise((r) => setTimeout(r, 200));
		}
	}
	console.error(`no answer from ${url} within ${seconds} s`);
	process.exit(1);
}

function readExpected(file) {
	const out = new Map();
	for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
		const line = raw.replace(/(^|\s)#.*/, '').trim();   // '#' after a space: a comment
		if (!line) continue;
		const m = line.match(/^(\S+)\s*(.*)$/);
		out.set(m[1], m[2] || '(no reason given)');
	}
	return out;
}

// <dir>/server-<scenario>-<ISO timestamp with - for : and .>/checks.json
function collect(specs) {
	const found = new Map();
	for (const spec of specs) {
		const eq = spec.indexOf('=');
		const prefix = eq < 0 ? '' : spec.slice(0, eq);
		const dir = eq < 0 ? spec : spec.slice(eq + 1);
		if (!fs.existsSync(dir)) continue;
		for (const ent of fs.readdirSync(dir)) {
			const m = ent.match(/^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d+Z$/);
			const file = path.join(dir, ent, 'checks.json');
			if (!m || !fs.existsSync(file)) continue;
			found.set(prefix + m[1], JSON.parse(fs.readFileSync(file, 'utf8')));
		}
	}
	return found;
}

function verdict(checks) {
	if (checks.some((c) => c.status === 'FAILURE')) return 'fail';
	if (checks.length === 0 || checks.every((c) => c.status === 'SKIPPED' || c.status === 'INFO')) return 'skip';
	return 'pass';
}

// The verdict of one scenario against EXPECTED: fail / xfail / xpass (something listed passes
// now) / pass / skip, with the reasons of the listed checks and the unexpected failures.
function judge(name, checks, expected) {
	const failing = checks.filter((c) => c.status === 'FAILURE');
	const whole = expected.get(name);
	const listed = [...expected].filter(([k]) => k.startsWith(`${name}#`)).map(([k, why]) => [k.slice(name.length + 1), why]);
	const unexpected = whole ? [] : failing.filter((c) => !listed.some(([id]) => id === c.id));
	const fixed = listed.filter(([id]) => !failing.some((c) => c.id === id)).map(([id]) => id);
	const why = whole ? [whole] : listed.filter(([id]) => !fixed.includes(id)).map(([id, w]) => `${id}: ${w}`);
	if (unexpected.length) return { v: 'fail', unexpected };
	if (whole && !failing.length) return { v: 'xpass', fixed: ['(the whole scenario)'] };
	if (fixed.length) return { v: 'xpass', fixed };
	if (failing.length) return { v: 'xfail', why };
	return { v: verdict(checks) };
}

function report(expectedFile, ranFile, dirs) {
	const expected = readExpected(expectedFile);
	const results = collect(dirs);
	const base = path.basename(expectedFile);
	for (const name of fs.readFileSync(ranFile, 'utf8').split('\n').map((l) => l.trim()).filter(Boolean))
		if (!results.has(name))
			results.set(name, [{ id: name, status: 'FAILURE', errorMessage: 'the scenario produced no results (its run crashed or timed out)' }]);
	let passed = 0, failed = 0, xfail = 0;
	for (const [name, checks] of [...results].sort()) {
		const j = judge(name, checks, expected);
		if (j.v === 'xfail') {
			xfail++;
			console.log(`xfail ${name}  (${j.why.join('; ').slice(0, 300)})`);
		} else if (j.v === 'fail') {
			failed++;
			console.log(`FAIL  ${name}`);
			for (const c of j.unexpected)
				console.log(`        ${c.id}: ${(c.errorMessage ?? c.description ?? '').split('\n')[0].slice(0, 400)}`);
		} else if (j.v === 'xpass') {
			passed++;
			console.log(`XPASS ${name}  now passing: ${j.fixed.join(', ')}; remove it from ${base}`);
		} else if (j.v === 'skip') {
			console.log(`skip  ${name}  (${checks.map((c) => c.errorMessage ?? c.id).join('; ').slice(0, 200)})`);
		} else {
			passed++;
			console.log(`ok    ${name}`);
		}
	}
	for (const key of expected.keys())
		if (!results.has(key.split('#')[0])) console.log(`note  ${key} is listed in ${base} but did not run`);
	console.log(`${xfail} expected failures (${base})`);
	console.log(`${passed} passed, ${failed} failed`);
	process.exit(failed > 0 ? 1 : 0);
}

if (cmd === 'port') freePort();
else if (cmd === 'wait') await waitFor(args[0], Number(args[1] ?? 30));
else if (cmd === 'report') report(args[0], args[1], args.slice(2));
else {
	console.error('usage: node util.mjs port | wait URL SECONDS | report EXPECTED RAN DIR...');
	process.exit(2);
}
