-- bench/triggers.sql: the "hand-written triggers" baseline of the benchmark.
--
-- What many teams write today instead of denormd: the source entities in one
-- table per type, and PL/pgSQL row triggers on those tables that recompute the
-- denormalized documents of bench/config.yaml in the same transaction:
--
--   authors        author data + id + countOfBooks + books (ids of the books
--                  whose authorIds holds the author, ascending)
--   books          book data + id + authors (one {id, name, thumbnailUrl} per
--                  live author in authorIds, in array order; missing skipped)
--   posts          post data + id + recentComments (3 newest comments) +
--                  countOfComments
--   post_comments  the comments of each (string) postId, oldest first, in
--                  documents of 100: {"id": "<postId>:<n>", "postId", "comments"}
--
-- The documents are the ones denormd computes (docs/configuration.md and the
-- rules of DESIGN.md); bench/triggers_check.sh proves it against the denormd
-- binary.
--
-- Usage (the schema defaults to "triggers"; it is created if missing and must
-- not already hold these tables):
--   psql -v ON_ERROR_STOP=1 -v schema=bench_triggers -f bench/triggers.sql
-- Then, one event per call, or an array of events in order:
--   select bench_triggers.apply_event('{"type":"book","id":"b1","op":"upsert","version":1,"data":{...}}');
--   select bench_triggers.apply_events('[{...}, {...}]');
--
-- apply_event and apply_events set search_path to the schema themselves (and
-- two planner options, see there); the trigger functions reference the tables
-- unqualified, so plain DML on the source tables (without the apply
-- functions) needs the schema on the search_path.
--
-- Known differences from denormd, all about odd value types that the
-- benchmark's events should not contain: a template part holding an object
-- or array renders with jsonb's spacing ({"a": 1}) where denormd writes
-- compact JSON, and a number renders as jsonb prints it (1e2 -> 100, denormd
-- 100.0); an order_by value that is an object or array compares by jsonb
-- text; an integer and a fraction that are equal as doubles but not exactly
-- are ordered, not tied; a version written 1.0 is accepted.
-- Concurrency: like most hand-written triggers, these recompute under READ
-- COMMITTED without extra locks, so concurrent writers touching the same
-- documents can leave a stale copy or deadlock on document rows (denormd's
-- two-phase locking avoids both). Run one writer, or retry deadlocks.

\if :{?schema}
\else
\set schema triggers
\endif

BEGIN;

CREATE SCHEMA IF NOT EXISTS :"schema";
SET LOCAL search_path = :"schema";

-----------------------------------------------------------------------------
-- Source tables: one per entity type. A delete keeps a tombstone (deleted,
-- data null) with its version, so a late older event cannot bring it back.
-----------------------------------------------------------------------------

CREATE TABLE author  (id text COLLATE "C" PRIMARY KEY, version numeric, deleted boolean NOT NULL DEFAULT false, data jsonb);
CREATE TABLE book    (id text COLLATE "C" PRIMARY KEY, version numeric, deleted boolean NOT NULL DEFAULT false, data jsonb);
CREATE TABLE post    (id text COLLATE "C" PRIMARY KEY, version numeric, deleted boolean NOT NULL DEFAULT false, data jsonb);
CREATE TABLE comment (id text COLLATE "C" PRIMARY KEY, version numeric, deleted boolean NOT NULL DEFAULT false, data jsonb);

-----------------------------------------------------------------------------
-- Collection tables: what readers query.
-----------------------------------------------------------------------------

CREATE TABLE authors (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL);
CREATE TABLE books   (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL);
CREATE TABLE posts   (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL);
-- post_id and n (bucket number) let a recompute find and trim a group's documents.
CREATE TABLE post_comments (
  id      text COLLATE "C" PRIMARY KEY,   -- "<postId>:<n>"
  post_id text COLLATE "C" NOT NULL,
  n       integer NOT NULL,
  doc     jsonb NOT NULL
);
CREATE INDEX post_comments_group ON post_comments (post_id, n);

-----------------------------------------------------------------------------
-- Helpers. The SQL ones are one-expression functions, which the planner
-- inlines (also into index expressions, so queries match the indexes). Those
-- calling jsonb_build_object must be STABLE like it, or they are not inlined.
-----------------------------------------------------------------------------

-- RFC 7396 JSON merge patch: a non-object patch replaces the target; an object
-- patch merges key by key, recursively, null deleting the key.
CREATE FUNCTION jsonb_merge_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  k text;
  v jsonb;
BEGIN
  IF jsonb_typeof(patch) IS DISTINCT FROM 'object' THEN
    RETURN patch;
  END IF;
  IF jsonb_typeof(target) IS DISTINCT FROM 'object' THEN
    target := '{}';
  END IF;
  -- Fast path, the usual patch: no null and no nested object, a plain overwrite.
  IF NOT EXISTS (SELECT 1 FROM jsonb_each(patch) p
                 WHERE jsonb_typeof(p.value) IN ('null', 'object')) THEN
    RETURN target || patch;
  END IF;
  FOR k, v IN SELECT p.key, p.value FROM jsonb_each(patch) p LOOP
    IF jsonb_typeof(v) = 'null' THEN
      target := target - k;
    ELSIF jsonb_typeof(v) = 'object' THEN
      target := target || jsonb_build_object(k, jsonb_merge_patch(target -> k, v));
    ELSE
      target := target || jsonb_build_object(k, v);
    END IF;
  END LOOP;
  RETURN target;
END $$;

-- The ids a reference field names (via / by): a string, or the distinct
-- strings of an array; anything else names nothing.
CREATE FUNCTION reference_targets(v jsonb) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  CASE jsonb_typeof(v)
    WHEN 'string' THEN
      RETURN ARRAY[v #>> '{}'];
    WHEN 'array' THEN
      RETURN ARRAY(SELECT DISTINCT e #>> '{}' FROM jsonb_array_elements(v) e
                   WHERE jsonb_typeof(e) = 'string');
    ELSE
      RETURN '{}';
  END CASE;
END $$;

-- Ids in exactly one of a and b (each without duplicates): the parents whose
-- count/ids change when a child's references move from a to b.
CREATE FUNCTION symmetric_difference(a text[], b text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  result text[] := '{}';
  x text;
BEGIN
  FOREACH x IN ARRAY a LOOP
    IF NOT x = ANY (b) THEN result := result || x; END IF;
  END LOOP;
  FOREACH x IN ARRAY b LOOP
    IF NOT x = ANY (a) THEN result := result || x; END IF;
  END LOOP;
  RETURN result;
END $$;

-- Sort keys for order_by on a JSON value, as denormd orders: numbers
-- numerically, then strings by bytes, then booleans, arrays, objects; absent
-- or null (rank 5) last. Within a rank only one of order_num/order_text is set.
CREATE FUNCTION order_rank(v jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE jsonb_typeof(v)
           WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2
           WHEN 'array' THEN 3 WHEN 'object' THEN 4 ELSE 5
         END
$$;
CREATE FUNCTION order_num(v jsonb) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric END
$$;
CREATE FUNCTION order_text(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE jsonb_typeof(v)
           WHEN 'string' THEN v #>> '{}'
           WHEN 'boolean' THEN v::text        -- 'false' < 'true'
           WHEN 'array' THEN v::text
           WHEN 'object' THEN v::text
         END
$$;

-- A {template} part: strings as they are, null or missing as '', others as JSON.
CREATE FUNCTION template_text(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE COALESCE(jsonb_typeof(v), 'null')
           WHEN 'null' THEN ''
           WHEN 'string' THEN v #>> '{}'
           ELSE v::text
         END
$$;

-- books.authors[i]: select {id: id, name: "{firstName} {lastName}",
-- thumbnailUrl: images[].thumbnail}, the last left out when no element of the
-- images array has a thumbnail (a null thumbnail counts as present).
CREATE FUNCTION author_view(id text, data jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object('id', id,
                            'name', template_text(data -> 'firstName') || ' ' || template_text(data -> 'lastName'))
      || CASE WHEN jsonb_path_exists(data, 'strict $.images[*] ? (exists(@.thumbnail))', '{}', true)
              THEN jsonb_build_object('thumbnailUrl',
                     jsonb_path_query_first(data, 'strict $.images[*] ? (exists(@.thumbnail)).thumbnail', '{}', true))
              ELSE '{}'::jsonb
         END
$$;

-- recentComments[i] and comments[i]: select [id, author, comment], absent
-- fields left out.
CREATE FUNCTION comment_item(id text, data jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object('id', id)
      || CASE WHEN data ? 'author' THEN jsonb_build_object('author', data -> 'author') ELSE '{}'::jsonb END
      || CASE WHEN data ? 'comment' THEN jsonb_build_object('comment', data -> 'comment') ELSE '{}'::jsonb END
$$;

-----------------------------------------------------------------------------
-- Indexes that keep every recompute O(affected documents).
-----------------------------------------------------------------------------

-- author -> its books (countOfBooks, books, and the fan-out of an author change
-- to the books that copy its name and thumbnail). Serves
-- data->'authorIds' @> '"a1"', true for "a1" and for arrays holding "a1".
CREATE INDEX book_author_ids ON book USING gin ((data -> 'authorIds') jsonb_path_ops);

-- post -> its comments (posts: count, recentComments; post_comments: the
-- group). Its keys follow the bucket order (createdAt ascending, absent last,
-- ties by id), so a large group can be read presorted; for a few dozen
-- comments the planner rather takes a bitmap scan and a quick sort. Only
-- string postIds group; the expressions are those of the queries below.
CREATE INDEX comment_post_order ON comment (
  ((data ->> 'postId') COLLATE "C"),
  order_rank(data -> 'createdAt'),
  order_num(data -> 'createdAt'),
  (order_text(data -> 'createdAt') COLLATE "C"),
  id)
  WHERE jsonb_typeof(data -> 'postId') = 'string';

-- via: postId also matches an array holding the post id (count and embed, not
-- buckets). No benchmark comment has one, so this partial index stays empty.
CREATE INDEX comment_post_array ON comment USING gin ((data -> 'postId') jsonb_path_ops)
  WHERE jsonb_typeof(data -> 'postId') = 'array';

-----------------------------------------------------------------------------
-- Document recompute, set-based: each takes the ids (or groups) to refresh,
-- upserts the documents of the live ones (writing only those that changed),
-- and deletes the documents of the others.
-----------------------------------------------------------------------------

CREATE FUNCTION refresh_authors(ids text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO authors AS d (id, doc)
  SELECT a.id, a.data || jsonb_build_object('id', a.id, 'countOfBooks', r.n, 'books', r.books)
  FROM author a
  CROSS JOIN LATERAL (
    SELECT count(*) AS n, COALESCE(jsonb_agg(b.id ORDER BY b.id), '[]') AS books
    FROM book b
    WHERE b.data -> 'authorIds' @> to_jsonb(a.id)        -- GIN book_author_ids
  ) r
  WHERE a.id = ANY (ids) AND NOT a.deleted
  ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc
    WHERE d.doc IS DISTINCT FROM EXCLUDED.doc;

  DELETE FROM authors d
  WHERE d.id = ANY (ids)
    AND NOT EXISTS (SELECT 1 FROM author a WHERE a.id = d.id AND NOT a.deleted);
END $$;

CREATE FUNCTION refresh_books(ids text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO books AS d (id, doc)
  SELECT b.id,
         CASE WHEN b.data ? 'authorIds'
              THEN b.data || jsonb_build_object('id', b.id, 'authors', l.authors)
              ELSE (b.data - 'authors') || jsonb_build_object('id', b.id)   -- no reference: field left out
         END
  FROM book b
  CROSS JOIN LATERAL (
    SELECT CASE jsonb_typeof(b.data -> 'authorIds')
             -- an array: one view per live author, in array order
             WHEN 'array' THEN COALESCE(
               (SELECT jsonb_agg(author_view(a.id, a.data) ORDER BY e.pos)
                FROM jsonb_array_elements(b.data -> 'authorIds') WITH ORDINALITY e(v, pos)
                JOIN author a ON a.id = (e.v #>> '{}') AND NOT a.deleted
                WHERE jsonb_typeof(e.v) = 'string'),
               '[]')
             -- a single reference: the view, or null when missing
             ELSE COALESCE(
               (SELECT author_view(a.id, a.data)
                FROM author a
                WHERE jsonb_typeof(b.data -> 'authorIds') = 'string'
                  AND a.id = (b.data ->> 'authorIds') AND NOT a.deleted),
               'null')
           END AS authors
  ) l
  WHERE b.id = ANY (ids) AND NOT b.deleted
  ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc
    WHERE d.doc IS DISTINCT FROM EXCLUDED.doc;

  DELETE FROM books d
  WHERE d.id = ANY (ids)
    AND NOT EXISTS (SELECT 1 FROM book b WHERE b.id = d.id AND NOT b.deleted);
END $$;

CREATE FUNCTION refresh_posts(ids text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO posts AS d (id, doc)
  SELECT p.id, p.data || jsonb_build_object('id', p.id, 'recentComments', r.recent,
                                            'countOfComments', r.n)
  FROM post p
  CROSS JOIN LATERAL (
    SELECT count(*) AS n,
           COALESCE(jsonb_agg(comment_item(c.id, c.data) ORDER BY c.rn) FILTER (WHERE c.rn <= 3),
                    '[]') AS recent
    FROM (
      SELECT c.id, c.data,
             -- createdAt descending, absent last, ties by id ascending
             row_number() OVER (ORDER BY order_rank(c.data -> 'createdAt') = 5,
                                         order_rank(c.data -> 'createdAt') DESC,
                                         order_num(c.data -> 'createdAt') DESC,
                                         order_text(c.data -> 'createdAt') COLLATE "C" DESC,
                                         c.id) AS rn
      FROM (SELECT id, data FROM comment                  -- comment_post_order
            WHERE jsonb_typeof(data -> 'postId') = 'string'
              AND (data ->> 'postId') COLLATE "C" = p.id
            UNION ALL
            SELECT id, data FROM comment                  -- comment_post_array
            WHERE jsonb_typeof(data -> 'postId') = 'array'
              AND data -> 'postId' @> to_jsonb(p.id)) c
    ) c
  ) r
  WHERE p.id = ANY (ids) AND NOT p.deleted
  ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc
    WHERE d.doc IS DISTINCT FROM EXCLUDED.doc;

  DELETE FROM posts d
  WHERE d.id = ANY (ids)
    AND NOT EXISTS (SELECT 1 FROM post p WHERE p.id = d.id AND NOT p.deleted);
END $$;

-- Rebuilds every bucket document of the given postId groups (members found
-- through comment_post_order); unchanged buckets are not rewritten, buckets
-- past the new end are deleted.
CREATE FUNCTION refresh_post_comments(groups text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  WITH members AS (
    SELECT (c.data ->> 'postId') COLLATE "C" AS g, c.id, c.data,
           row_number() OVER (PARTITION BY (c.data ->> 'postId') COLLATE "C"
                              ORDER BY order_rank(c.data -> 'createdAt'),
                                       order_num(c.data -> 'createdAt'),
                                       order_text(c.data -> 'createdAt') COLLATE "C",
                                       c.id) - 1 AS pos
    FROM comment c
    WHERE jsonb_typeof(c.data -> 'postId') = 'string'
      AND (c.data ->> 'postId') COLLATE "C" = ANY (groups)
  ),
  buckets AS (
    SELECT g, (pos / 100)::integer AS n, jsonb_agg(comment_item(id, data) ORDER BY pos) AS items
    FROM members
    GROUP BY g, pos / 100
  ),
  written AS (
    INSERT INTO post_comments AS d (id, post_id, n, doc)
    SELECT g || ':' || n, g, n,
           jsonb_build_object('id', g || ':' || n, 'postId', g, 'comments', items)
    FROM buckets
    ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc
      WHERE d.doc IS DISTINCT FROM EXCLUDED.doc
  )
  DELETE FROM post_comments d
  WHERE d.post_id = ANY (groups)
    AND d.n >= COALESCE((SELECT max(b.n) + 1 FROM buckets b WHERE b.g = d.post_id), 0);
END $$;

-----------------------------------------------------------------------------
-- Triggers. Each recomputes the documents its row change can affect, and
-- only those: a change that does not alter what a parent sees (e.g. a book's
-- title, for its authors) does not touch the parent.
-----------------------------------------------------------------------------

-- author: its own document; the books that copy it, when its copied view
-- (name, thumbnail) or its existence changed.
CREATE FUNCTION author_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  the_id text;
  old_view jsonb;
  new_view jsonb;
BEGIN
  IF TG_OP = 'DELETE' THEN the_id := OLD.id; ELSE the_id := NEW.id; END IF;
  IF TG_OP <> 'INSERT' THEN
    IF NOT OLD.deleted THEN old_view := author_view(OLD.id, OLD.data); END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NOT NEW.deleted THEN new_view := author_view(NEW.id, NEW.data); END IF;
  END IF;

  PERFORM refresh_authors(ARRAY[the_id]);
  IF old_view IS DISTINCT FROM new_view THEN
    PERFORM refresh_books(ARRAY(SELECT b.id FROM book b
                                WHERE b.data -> 'authorIds' @> to_jsonb(the_id)));
  END IF;
  RETURN NULL;
END $$;

-- book: its own document; the authors whose count/ids change, i.e. those it
-- started or stopped referencing.
CREATE FUNCTION book_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  the_id text;
  old_refs text[] := '{}';
  new_refs text[] := '{}';
BEGIN
  IF TG_OP = 'DELETE' THEN the_id := OLD.id; ELSE the_id := NEW.id; END IF;
  IF TG_OP <> 'INSERT' THEN
    IF NOT OLD.deleted THEN old_refs := reference_targets(OLD.data -> 'authorIds'); END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NOT NEW.deleted THEN new_refs := reference_targets(NEW.data -> 'authorIds'); END IF;
  END IF;

  PERFORM refresh_books(ARRAY[the_id]);
  IF old_refs IS DISTINCT FROM new_refs THEN
    PERFORM refresh_authors(symmetric_difference(old_refs, new_refs));
  END IF;
  RETURN NULL;
END $$;

-- post: its own document (bucket documents do not depend on the post).
CREATE FUNCTION post_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM refresh_posts(ARRAY[OLD.id]);
  ELSE
    PERFORM refresh_posts(ARRAY[NEW.id]);
  END IF;
  RETURN NULL;
END $$;

-- comment: the posts whose count or recentComments change, and the bucket
-- groups (string postId) it leaves or joins or whose content it changes.
CREATE FUNCTION comment_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  old_live boolean := false;
  new_live boolean := false;
  old_refs text[] := '{}';
  new_refs text[] := '{}';
  old_group text;
  new_group text;
  view_changed boolean;          -- what an embedding sees: selected fields or createdAt
  post_ids text[];
  group_ids text[];
BEGIN
  IF TG_OP <> 'INSERT' THEN
    IF NOT OLD.deleted THEN
      old_live := true;
      old_refs := reference_targets(OLD.data -> 'postId');
      IF jsonb_typeof(OLD.data -> 'postId') = 'string' THEN old_group := OLD.data ->> 'postId'; END IF;
    END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NOT NEW.deleted THEN
      new_live := true;
      new_refs := reference_targets(NEW.data -> 'postId');
      IF jsonb_typeof(NEW.data -> 'postId') = 'string' THEN new_group := NEW.data ->> 'postId'; END IF;
    END IF;
  END IF;

  IF old_live AND new_live THEN
    view_changed := comment_item(OLD.id, OLD.data) IS DISTINCT FROM comment_item(NEW.id, NEW.data)
                 OR OLD.data -> 'createdAt' IS DISTINCT FROM NEW.data -> 'createdAt';
  ELSE
    view_changed := old_live <> new_live;
  END IF;

  -- posts: all old and new parents when the embedded view changed, otherwise
  -- only those gained or lost (their count changes).
  IF view_changed THEN
    post_ids := ARRAY(SELECT unnest(old_refs) UNION SELECT unnest(new_refs));
  ELSIF old_refs IS DISTINCT FROM new_refs THEN
    post_ids := symmetric_difference(old_refs, new_refs);
  END IF;
  IF cardinality(post_ids) > 0 THEN
    PERFORM refresh_posts(post_ids);
  END IF;

  IF view_changed OR old_group IS DISTINCT FROM new_group THEN
    group_ids := array_remove(ARRAY[old_group, new_group], NULL);
    IF old_group = new_group THEN group_ids := ARRAY[old_group]; END IF;
    IF cardinality(group_ids) > 0 THEN
      PERFORM refresh_post_comments(group_ids);
    END IF;
  END IF;
  RETURN NULL;
END $$;

-- Row triggers. Updates that change neither data nor liveness (a version-only
-- change) recompute nothing.
CREATE TRIGGER author_changed AFTER INSERT OR DELETE ON author
  FOR EACH ROW EXECUTE FUNCTION author_changed();
CREATE TRIGGER author_updated AFTER UPDATE ON author
  FOR EACH ROW WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.data IS DISTINCT FROM NEW.data)
  EXECUTE FUNCTION author_changed();

CREATE TRIGGER book_changed AFTER INSERT OR DELETE ON book
  FOR EACH ROW EXECUTE FUNCTION book_changed();
CREATE TRIGGER book_updated AFTER UPDATE ON book
  FOR EACH ROW WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.data IS DISTINCT FROM NEW.data)
  EXECUTE FUNCTION book_changed();

CREATE TRIGGER post_changed AFTER INSERT OR DELETE ON post
  FOR EACH ROW EXECUTE FUNCTION post_changed();
CREATE TRIGGER post_updated AFTER UPDATE ON post
  FOR EACH ROW WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.data IS DISTINCT FROM NEW.data)
  EXECUTE FUNCTION post_changed();

CREATE TRIGGER comment_changed AFTER INSERT OR DELETE ON comment
  FOR EACH ROW EXECUTE FUNCTION comment_changed();
CREATE TRIGGER comment_updated AFTER UPDATE ON comment
  FOR EACH ROW WHEN (OLD.deleted IS DISTINCT FROM NEW.deleted OR OLD.data IS DISTINCT FROM NEW.data)
  EXECUTE FUNCTION comment_changed();

-----------------------------------------------------------------------------
-- Events.
-----------------------------------------------------------------------------

-- Applies one event to its source table; the triggers do the rest. Returns
-- 'applied', 'stale' (version not greater than the stored one), or 'invalid'.
-- upsert replaces the data, patch merges into the live data (or into {} when
-- the entity is absent or deleted), delete leaves a tombstone. An event
-- without version always applies and keeps the stored version.
CREATE FUNCTION apply_one_event(e jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  typ text := e ->> 'type';
  op text := e ->> 'op';
  eid text := e ->> 'id';
  payload jsonb := e -> 'data';
  ver numeric;
  is_delete boolean;
  is_patch boolean;
  new_data jsonb;                -- the data when there is no live row to patch
  n integer;
BEGIN
  IF jsonb_typeof(e) IS DISTINCT FROM 'object'
     OR typ IS NULL OR typ NOT IN ('author', 'book', 'post', 'comment')
     OR jsonb_typeof(e -> 'id') IS DISTINCT FROM 'string' OR eid = ''
     OR op IS NULL OR op NOT IN ('upsert', 'patch', 'delete') THEN
    RETURN 'invalid';
  END IF;
  is_delete := op = 'delete';
  is_patch := op = 'patch';
  IF NOT is_delete AND jsonb_typeof(payload) IS DISTINCT FROM 'object' THEN
    RETURN 'invalid';
  END IF;
  IF jsonb_typeof(e -> 'version') = 'number' THEN
    ver := (e -> 'version')::numeric;
    IF ver < 0 OR ver <> trunc(ver) OR ver > 18446744073709551615 THEN RETURN 'invalid'; END IF;
  ELSIF e ? 'version' AND jsonb_typeof(e -> 'version') <> 'null' THEN
    RETURN 'invalid';
  END IF;
  IF is_delete THEN
    new_data := NULL;
  ELSIF is_patch THEN
    new_data := jsonb_merge_patch('{}', payload);
  ELSE
    new_data := payload;
  END IF;

  -- The same upsert for each table; the WHERE of ON CONFLICT is the version check.
  -- Written out per table rather than EXECUTE format('... %I ...'): static SQL is
  -- planned once per session, EXECUTE plans on every call, which would slow the
  -- baseline for a reason no hand-written trigger has.
  CASE typ
  WHEN 'author' THEN
    INSERT INTO author AS s (id, version, deleted, data) VALUES (eid, ver, is_delete, new_data)
    ON CONFLICT (id) DO UPDATE SET
      version = COALESCE(EXCLUDED.version, s.version),
      deleted = EXCLUDED.deleted,
      data = CASE WHEN is_patch AND NOT s.deleted THEN jsonb_merge_patch(s.data, payload)
                  ELSE EXCLUDED.data END
    WHERE ver IS NULL OR s.version IS NULL OR ver > s.version;
  WHEN 'book' THEN
    INSERT INTO book AS s (id, version, deleted, data) VALUES (eid, ver, is_delete, new_data)
    ON CONFLICT (id) DO UPDATE SET
      version = COALESCE(EXCLUDED.version, s.version),
      deleted = EXCLUDED.deleted,
      data = CASE WHEN is_patch AND NOT s.deleted THEN jsonb_merge_patch(s.data, payload)
                  ELSE EXCLUDED.data END
    WHERE ver IS NULL OR s.version IS NULL OR ver > s.version;
  WHEN 'post' THEN
    INSERT INTO post AS s (id, version, deleted, data) VALUES (eid, ver, is_delete, new_data)
    ON CONFLICT (id) DO UPDATE SET
      version = COALESCE(EXCLUDED.version, s.version),
      deleted = EXCLUDED.deleted,
      data = CASE WHEN is_patch AND NOT s.deleted THEN jsonb_merge_patch(s.data, payload)
                  ELSE EXCLUDED.data END
    WHERE ver IS NULL OR s.version IS NULL OR ver > s.version;
  WHEN 'comment' THEN
    INSERT INTO comment AS s (id, version, deleted, data) VALUES (eid, ver, is_delete, new_data)
    ON CONFLICT (id) DO UPDATE SET
      version = COALESCE(EXCLUDED.version, s.version),
      deleted = EXCLUDED.deleted,
      data = CASE WHEN is_patch AND NOT s.deleted THEN jsonb_merge_patch(s.data, payload)
                  ELSE EXCLUDED.data END
    WHERE ver IS NULL OR s.version IS NULL OR ver > s.version;
  END CASE;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN CASE WHEN n = 0 THEN 'stale' ELSE 'applied' END;
END $$;

-- The entry points pin search_path to the schema (the functions above refer
-- to the tables unqualified) and set two planner options for the statements
-- they run (trigger statements included), all of which are id lookups:
-- - plan_cache_mode: left to itself, the plan cache keeps choosing custom
--   plans for the id-array queries, i.e. plans every statement of every
--   trigger again (about 40% of the time of a mixed workload);
-- - enable_seqscan off: while a table is small (a load from empty) the
--   planner prefers scanning it to the GIN index, underrating the cost of
--   @> per row, and the cached generic plan keeps the scan as the table grows
--   until the next ANALYZE.
CREATE FUNCTION apply_event(e jsonb) RETURNS text LANGUAGE plpgsql
SET search_path = :"schema"
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
BEGIN
  RETURN apply_one_event(e);
END $$;

-- Applies a JSON array of events in order, in the caller's transaction (the
-- "transactions of 1,000 events" baseline). Returns {"applied", "stale", "invalid"}.
CREATE FUNCTION apply_events(events jsonb) RETURNS jsonb LANGUAGE plpgsql
SET search_path = :"schema"
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
DECLARE
  e jsonb;
  applied bigint := 0;
  stale bigint := 0;
  invalid bigint := 0;
BEGIN
  FOR e IN SELECT value FROM jsonb_array_elements(events) LOOP
    CASE apply_one_event(e)
      WHEN 'applied' THEN applied := applied + 1;
      WHEN 'stale' THEN stale := stale + 1;
      ELSE invalid := invalid + 1;
    END CASE;
  END LOOP;
  RETURN jsonb_build_object('applied', applied, 'stale', stale, 'invalid', invalid);
END $$;

COMMIT;
