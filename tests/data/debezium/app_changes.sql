-- The scripted change sequence streamed by Debezium after its snapshot (run once the
-- connector is RUNNING and the snapshot is done). Each step is one transaction,
-- unless it says otherwise; the comments name what each step shows in the records.

-- 1. insert (op c)
insert into authors (id, first_name, last_name, images)
  values ('a3', 'Dirk', 'Stinger', '[{"thumbnail": "https://img.example/a3-t.png"}]');

-- 2. a book and its author link in one transaction: one txId, two LSNs, two topics
begin;
insert into books (id, name, pub_id, price, published_on)
  values ('b3', 'Taking over the world one JSON doc at a time', null, 5.00, '2020-02-29');
insert into book_authors (book_id, author_id, position) values ('b3', 'a3', 1);
commit;

-- 3. update of a numeric column (op u; "21.00" keeps its scale)
update books set price = 21.00 where id = 'b1';

-- 4. book b1 loses author a2 and gains author a3, in one transaction
begin;
delete from book_authors where book_id = 'b1' and author_id = 'a2';
insert into book_authors (book_id, author_id, position) values ('b1', 'a3', 2);
commit;

-- 5. author rename: the documents of books b1 and b2 carry a1's name
update authors set last_name = 'Andersen-Smith' where id = 'a1';

-- 6. jsonb update
update authors set images = '[{"thumbnail": "https://img.example/a2-t2.png"}, {"large": "https://img.example/a2-l.png"}]'
  where id = 'a2';

-- 7. comments: fractional seconds of several lengths, an update, a delete (d + tombstone)
insert into comments (id, post_id, author, comment, created_at) values
  ('c3', 'p1', 'angry', 'comment number 3', '2024-01-02 03:04:07.5+00'),
  ('c4', 'p1', 'bored', 'comment number 4', '2024-01-02 03:04:07.123456+00'),
  ('c5', 'p1', 'anon',  'comment number 5', '2024-01-02 03:04:08+00');
update comments set comment = 'comment number 2, edited' where id = 'c2';
delete from comments where id = 'c1';

-- 8. primary-key update (d of the old key, tombstone, c of the new key)
update comments set id = 'c2b' where id = 'c2';

-- 9. a timestamp (without time zone) update
update posts set edited_at = '2024-02-03 04:05:06' where id = 'p1';

-- 10. delete a book with its author links, in one transaction (the links first: foreign keys)
begin;
delete from book_authors where book_id = 'b2';
delete from books where id = 'b2';
commit;

-- 11. delete an author that no book references any more
delete from authors where id = 'a2';

-- 12. TRUNCATE of one table (op t, with skipped.operations=none), then an insert after it
truncate comments;
insert into comments (id, post_id, author, comment, created_at)
  values ('c6', 'p1', 'bob', 'comment number 6', '2024-01-02 03:04:09+00');
