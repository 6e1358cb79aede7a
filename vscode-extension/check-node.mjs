// `npm run package` runs this first (its prepackage script): vsce, which makes the .vsix, needs a newer Node.js than
// Debian 12's apt has (18), where it dies loading its HTTP client ("ReferenceError: File is not defined"). The
// minimum is vsce's own engines.node; below it, one line says what to install.
import { existsSync, readFileSync } from 'node:fs';

const manifest = new URL('./node_modules/@vscode/vsce/package.json', import.meta.url);
if (existsSync(manifest)) {  // else vsce is not installed: npm names what is missing itself
    const range = JSON.parse(readFileSync(manifest, 'utf8')).engines?.node ?? '';
    const minimum = Number(/\d+/.exec(range)?.[0] ?? 0);
    const running = process.versions.node;
    if (Number(running.split('.')[0]) < minimum) {
        console.error(`npm run package: vsce, which makes completer.vsix, needs Node.js ${minimum} or newer, `
            + `and this is Node.js ${running}: install a newer Node.js (Debian 12's apt has 18), then run it again`);
        process.exit(1);
    }
}
