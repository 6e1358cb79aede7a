-- a comment (
/* block [ comment */
SELECT id, 'it''s (' AS note, "quoted [id]"
FROM users
WHERE name = 'multi ( line
text' -- trailing [
  AND x > 1;
SELECT 'it''s (', E'it\'s [' FROM t;
SELECT [my column] FROM t;
