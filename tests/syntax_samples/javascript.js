// a comment (
/* a block [ comment */
const re = /["'(]+/g;
const path = `a/${dir}/b ( ${f("x")}`;
const multi = `first line (
second line ${name} [
third`;
const single = 'it\'s (';
const double = "say \"hi\" [";
const half = total / 2 / (n + 1);
if (!/^[[<]/.test(flags)) {
  console.log('ready');  // don't wait
}
const url = "http://example.com"; // a comment after a string
const items = `<ul>${list.map((x) => `<li>${x.name} (${x.id}</li>`).join("")}</ul>`;
const nested = `a ${ok ? `yes [` : 'no ('} b`;
const escaped = `cost \${ not code (`;
