-- The "application" database for denormd's Debezium fixtures and end-to-end test:
-- the article's entities as normalized tables, many-to-many through a join table.
-- Run on a fresh database of a PostgreSQL started with wal_level=logical, e.g.
--   scripts/postgres.sh psql -v ON_ERROR_STOP=1 -f tests/data/debezium/app_schema.sql
-- Re-runnable: drops what it creates first (drop the replication slot separately:
-- scripts/connect.sh reset).
-- Column types chosen so that Debezium's value encodings show: text, numeric
-- (decimal.handling.mode), date, timestamp, timestamptz (time.precision.mode), jsonb,
-- smallint; a composite primary key (book_authors).
set client_min_messages = warning;
drop publication if exists denormd_app;
drop table if exists comments, posts, book_authors, books, authors cascade;

create table authors (
  id         text primary key,
  first_name text not null,
  last_name  text not null,
  images     jsonb                        -- [{"thumbnail": url}, {"profile": url}, ...]
);

create table books (
  id           text primary key,
  name         text not null,
  pub_id       text,                      -- a plain reference (no publishers table here)
  price        numeric(10, 2),            -- decimal.handling.mode=string: "19.99"
  published_on date
);

-- Many-to-many: which authors wrote which book, in which order.
create table book_authors (
  book_id   text not null references books (id),
  author_id text not null references authors (id),
  position  smallint not null default 1,  -- the author's place in the book's author list
  primary key (book_id, author_id)
);

create table posts (
  id        text primary key,
  title     text not null,
  summary   text,
  edited_at timestamp                     -- without time zone: a different encoding than timestamptz
);

create table comments (
  id         text primary key,
  post_id    text not null references posts (id),
  author     text not null,
  comment    text not null,
  created_at timestamptz not null
);

-- What Debezium reads (pgoutput). The connector's publication.autocreate.mode=filtered
-- would create it too (and sets its tables to table.include.list when it exists).
create publication denormd_app for table authors, books, book_authors, posts, comments;
