// Bundles the extension into dist/extension.js (one CommonJS file, `vscode` left external).
import * as esbuild from 'esbuild';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

// The checkout this bundle is built from: an extension installed from the .vsix names it in its install commands
// while it still holds the repository (src/common/python.ts, findCheckout).
const checkout = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const ctx = await esbuild.context({
    entryPoints: ['src/extension.ts'],
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node18',
    outfile: 'dist/extension.js',
    external: ['vscode'],
    define: { COMPLETER_BUILT_FROM: JSON.stringify(checkout) },
    minify: production,
    sourcemap: !production,
    sourcesContent: false,
    logLevel: 'warning',
});

if (watch) {
    await ctx.watch();
} else {
    await ctx.rebuild();
    await ctx.dispose();
}
