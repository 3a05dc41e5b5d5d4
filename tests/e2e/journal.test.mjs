// Journal damage on a journal written by the real binary: for every case, `forkpoint fsck` and
// start-up (`forkpoint mcp`) give the same verdict and name the same file and offset, and
// `fsck --repair` never "repairs" damage.  A torn tail is cut by start-up and the cut is logged
// at the default log level.  A missing result blob is reported by both.
import { describe, it, before, after } from 'node:test';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { assert, BIN, writeConfig, countTool } from './lib.mjs';

const run = (args, opts = {}) => spawnSync(BIN, args, { encoding: 'utf8', timeout: 60000, ...opts });

// "<segment>@<offset>" or "HEAD": where a message says the damage is.
function where(text) {
	const m = /([0-9a-f]{16})\.seg: (?:torn tail cut at )?offset (\d+)/.exec(text);
	if (m) return `${m[1]}@${m[2]}`;
	return /\/HEAD: /.test(text) ? 'HEAD' : null;
}

// Record boundaries of a segment image (48-byte header, 17-byte record headers).
function boundaries(buf) {
	const out = [];
	let off = 48;
	while (off + 17 <= buf.length) {
		const len = buf.readUInt32LE(off);
		if (off + 17 + len > buf.length) break;
		out.push(off);
		off += 17 + len;
	}
	out.push(off);
	return out;
}

describe('journal damage: fsck and start-up agree', () => {
	const { dir, cfgPath, stateDir } = writeConfig({
		tools: [countTool('count', { mode: 'sync' })],
		server: { resultInlineBytes: 256 },
	});
	let n = 0;
	const copy = () => {
		const d = `${stateDir}-case${++n}`;
		fs.cpSync(stateDir, d, { recursive: true });
		const jdir = path.join(d, 'journal');
		const seg = path.join(jdir, fs.readdirSync(jdir).filter((f) => f.endsWith('.seg')).sort().pop());
		return { d, jdir, seg };
	};
	const files = (jdir) => fs.readdirSync(jdir).filter((f) => f !== 'LOCK').sort()
		.map((f) => `${f}:${fs.readFileSync(path.join(jdir, f)).toString('hex')}`).join('\n');

	before(() => {
		for (const a of ['{"n":3}', '{"n":2}', '{"n":200}', '{"n":1}']) {
			const r = run(['call', 'count', a, '--config', cfgPath, '--state', stateDir]);
			assert.equal(r.status, 0, r.stderr);
		}
		assert.equal(run(['fsck', '--state', stateDir]).status, 0);
	});
	after(() => fs.rmSync(dir, { recursive: true, force: true }));

	const refused = [
		['a flipped bit in the middle', (c) => {
			const b = fs.readFileSync(c.seg);
			b[Math.floor(b.length / 3)] ^= 0x08;
			fs.writeFileSync(c.seg, b);
		}],
		['a zero page', (c) => {
			const b = fs.readFileSync(c.seg);
			b.fill(0, Math.floor(b.length / 4), Math.floor(b.length / 4) + Math.min(4096, b.length >> 1));
			fs.writeFileSync(c.seg, b);
		}],
		['a truncation inside a record', (c) => fs.truncateSync(c.seg, fs.statSync(c.seg).size - 3)],
		['a truncation at a record boundary (after a clean shutdown)', (c) => {
			const bs = boundaries(fs.readFileSync(c.seg));
			fs.truncateSync(c.seg, bs[bs.length - 2]);
		}],
		['the segment missing', (c) => fs.unlinkSync(c.seg)],
		['HEAD missing', (c) => fs.unlinkSync(path.join(c.jdir, 'HEAD'))],
		['a segment of the previous format', (c) => {
			const b = fs.readFileSync(c.seg);
			b.write('FPJRNL01', 0);
			fs.writeFileSync(c.seg, b);
		}],
	];
	for (const [name, damage] of refused) {
		it(`${name}: refused by both at the same place, not repaired`, () => {
			const c = copy();
			damage(c);
			const before = files(c.jdir);
			const f = run(['fsck', '--state', c.d]);
			const s = run(['mcp', '--config', cfgPath, '--state', c.d], { input: '' });
			const r = run(['fsck', '--repair', '--state', c.d]);
			assert.equal(f.status, 1, f.stdout + f.stderr);
			assert.equal(s.status, 1, 'start-up must refuse');
			assert.equal(r.status, 1, 'fsck --repair must not repair damage');
			assert.ok(where(f.stderr), f.stderr);
			assert.equal(where(s.stderr), where(f.stderr), `fsck: ${f.stderr}\nstart-up: ${s.stderr}`);
			assert.equal(files(c.jdir), before, 'nothing is changed');
			fs.rmSync(c.d, { recursive: true, force: true });
		});
	}

	it('a torn tail: fsck reports it, start-up cuts it at the same offset and says so', () => {
		const c = copy();
		fs.appendFileSync(c.seg, Buffer.from('ffffff0011223344556677', 'hex'));
		const f = run(['fsck', '--state', c.d]);
		assert.equal(f.status, 1);
		assert.match(f.stderr, /torn tail of 11 bytes/);
		const s = run(['mcp', '--config', cfgPath, '--state', c.d], { input: '' });
		assert.equal(s.status, 0, s.stderr);
		assert.match(s.stderr, /level=warning.*torn tail cut at offset \d+ \(11 bytes kept in/);
		assert.equal(where(s.stderr), where(f.stderr));
		const again = run(['fsck', '--state', c.d]);
		assert.equal(again.status, 0, again.stderr);
		assert.match(again.stdout, /tasks: 4/);
		fs.rmSync(c.d, { recursive: true, force: true });
	});

	// Start-up checks a result blob's size (its content is hashed when it is read); fsck
	// hashes it.  Both name the blob the same way.
	for (const [name, spoil, why, whyStart] of [
		['missing', (p) => fs.rmSync(p), 'No such file or directory', 'No such file or directory'],
		['damaged', (p) => fs.appendFileSync(p, 'x'), 'content does not match its sha256', 'damaged'],
	]) {
		it(`a ${name} result blob: fsck and start-up both name it and say what is wrong`, () => {
			const c = copy();
			const blobs = path.join(c.d, 'blobs');
			const hex = fs.readdirSync(blobs).flatMap((d) => fs.readdirSync(path.join(blobs, d)))[0];
			assert.match(hex, /^[0-9a-f]{64}$/);
			spoil(path.join(blobs, hex.slice(0, 2), hex));
			const f = run(['fsck', '--state', c.d]);
			assert.equal(f.status, 1);
			assert.match(f.stdout, new RegExp(`result blob ${hex}: ${why}`));
			const s = run(['mcp', '--config', cfgPath, '--state', c.d], { input: '' });
			assert.match(s.stderr, new RegExp(`result blob ${hex}: ${whyStart}`));
			fs.rmSync(c.d, { recursive: true, force: true });
		});
	}
});
