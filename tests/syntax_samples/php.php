<?php
// a comment (
# another comment [
/* block ( comment */
?>
<p>Don't click (here)</p>
<a href='x'>'90s music</a>
<?php echo "done (";
#[Route('/x', methods: ['GET'])]
function greet(string $name): string {
    $single = 'it\'s (';
    $double = "Hello {$name} [";
    $sql = "SELECT *
        FROM users (
        WHERE id = ?";
    $text = 'first
second (';
    $doc = <<<EOT
    Here ( is "text
    EOT;
    $now = <<<'NOW'
    raw { text
    NOW;
    $url = "http://example.com"; // not a comment inside
    return $double . $single;
}
$a = '\\';
$b = "\\";
$c = "a # not a comment (";
$d = 'it\'s [';
