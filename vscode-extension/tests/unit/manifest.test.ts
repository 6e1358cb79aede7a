// package.json and the bundle agree with the code.
import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { COMMANDS, SERVER_ID } from '../../src/common/constants';

const root = path.resolve(__dirname, '..', '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

describe('manifest', () => {
    test('contributes exactly the commands the extension registers', () => {
        const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
        assert.deepEqual(contributed, Object.values(COMMANDS).sort());
    });

    test('trace setting matches the client id', () => {
        assert.ok(`${SERVER_ID}.trace.server` in manifest.contributes.configuration.properties);
    });

    test('engine is new enough for vscode-languageclient and @types/vscode', () => {
        const engine = manifest.engines.vscode.replace(/^\^/, '');
        const types = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', '@types', 'vscode', 'package.json'), 'utf8'));
        const [eMajor, eMinor] = engine.split('.').map(Number);
        const [tMajor, tMinor] = types.version.split('.').map(Number);
        assert.ok(tMajor < eMajor || (tMajor === eMajor && tMinor <= eMinor), `@types/vscode ${types.version} > engine ${engine}`);
        const client = JSON.parse(
            fs.readFileSync(path.join(root, 'node_modules', 'vscode-languageclient', 'package.json'), 'utf8'),
        );
        assert.equal(client.engines.vscode, manifest.engines.vscode);
    });

    test('the bundle needs only vscode and Node built-ins', (t) => {
        const bundle = path.join(root, manifest.main);
        if (!fs.existsSync(bundle)) {
            t.skip('dist/ not built (npm run build)');
            return;
        }
        const text = fs.readFileSync(bundle, 'utf8');
        const required = new Set([...text.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]));
        const builtins = new Set(builtinModules);
        for (const name of required) {
            assert.ok(name === 'vscode' || builtins.has(name.replace(/^node:/, '')), `bundle requires ${name}`);
        }
        assert.ok(required.has('vscode'));
    });
});
