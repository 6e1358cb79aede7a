export const EXTENSION_NAME = 'Completer';
export const SERVER_ID = 'completer';

export const COMMANDS = {
    toggle: 'completer.toggle',
    restartServer: 'completer.restartServer',
    showLogs: 'completer.showLogs',
    chooseModel: 'completer.chooseModel',
} as const;

/** Custom request answered by the server with at least `{model: string}`. */
export const INFO_REQUEST = 'completer/info';

/** Custom request `{uri}` answered with `{excluded: string | null}`: the completer.excludeFiles pattern that leaves
 *  the file alone, if any. */
export const FILE_INFO_REQUEST = 'completer/fileInfo';
