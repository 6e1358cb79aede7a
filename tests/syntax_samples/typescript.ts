// a comment (
interface Point { x: number; y: number }
const h = a! / 2 + (b! / 3);
const s: string = `value ( ${x as string}`;
function f<T>(x: T): T { return x; } /* done [ */
const q = 'a "quoted" (';
