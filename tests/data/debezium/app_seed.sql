-- Rows that exist before the connector starts: Debezium's initial snapshot reads
-- them (op "r"). Run after app_schema.sql, before scripts/connect.sh start.
insert into authors (id, first_name, last_name, images) values
  ('a1', 'Thomas', 'Andersen',
   '[{"thumbnail": "https://img.example/a1-t.png"}, {"profile": "https://img.example/a1-p.png"}]'),
  ('a2', 'William', 'Wakefield', '[{"thumbnail": "https://img.example/a2-t.png"}]');

insert into books (id, name, pub_id, price, published_on) values
  ('b1', 'Azure Cosmos DB 101', 'mspress', 19.99, '2017-05-01'),
  ('b2', 'Azure Cosmos DB for RDBMS Users', 'mspress', 24.50, null);

insert into book_authors (book_id, author_id, position) values
  ('b1', 'a1', 1),
  ('b1', 'a2', 2),
  ('b2', 'a1', 1);

insert into posts (id, title, summary, edited_at) values
  ('p1', 'What''s new in the coolest Cloud', 'A blog post by someone real famous', '2024-01-02 03:04:05.5');

insert into comments (id, post_id, author, comment, created_at) values
  ('c1', 'p1', 'bob',  'comment number 1', '2024-01-02 03:04:05+00'),
  ('c2', 'p1', 'jane', 'comment number 2', '2024-01-02 03:04:06.25+01');
