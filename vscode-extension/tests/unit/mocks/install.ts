// Import this first in a unit test: `require('vscode')` (and any module given to mockModule) then returns
// the stand-in instead of failing outside VS Code.

import Module = require('module');
import * as vscodeMock from './vscode';

const mocks = new Map<string, unknown>([['vscode', vscodeMock]]);

const moduleWithLoad = Module as unknown as {
    _load(request: string, parent: unknown, isMain: boolean): unknown;
};
const originalLoad = moduleWithLoad._load;
moduleWithLoad._load = function (request: string, parent: unknown, isMain: boolean) {
    if (mocks.has(request)) {
        return mocks.get(request);
    }
    return originalLoad.call(this, request, parent, isMain);
};

/** Replace a module for everything required after this call. */
export function mockModule(name: string, exports: unknown): void {
    mocks.set(name, exports);
}

export { vscodeMock };
export const mock = vscodeMock.mock;
