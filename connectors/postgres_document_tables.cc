#include "connectors/postgres_document_tables.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "connectors/postgres_work.h"

namespace denormd {

namespace {

// A bucket's columns as members of its row's JSON object.
void WriteBucketMeta(JsonWriter& w, const BucketMeta& meta) {
  w.Key("seq");
  w.Int64(meta.seq);
  w.Key("number");
  w.Uint64(meta.number);
  w.Key("members");
  w.Uint64(meta.members);
  if (meta.member_keys) {
    w.Key("member_keys");
    WriteJsonString(w, HexEncode(*meta.member_keys));
  }
  if (!meta.lo) return;
  w.Key("lo_sort");
  WriteJsonString(w, HexEncode(meta.lo->sort));
  w.Key("lo_id");
  WriteJsonString(w, meta.lo->id);
}

// A document's row as a member of the upsert's JSON array.
void WriteDocumentRow(JsonWriter& w, const DocumentRow& row) {
  w.StartObject();
  w.Key("id");
  WriteJsonString(w, row.id);
  w.Key("pk");
  if (row.pk) {
    WriteJsonString(w, *row.pk);
  } else {
    w.Null();
  }
  w.Key("doc");
  w.RawValue(row.json.data(), row.json.size(), rapidjson::kObjectType);
  if (row.bucket) WriteBucketMeta(w, *row.bucket);
  w.EndObject();
}

}  // namespace

Status PostgresDocumentTables::Upsert(const ProjectionConfig& projection,
                                      const std::vector<DocumentRow>& rows, uint64_t* written) {
  // A shared collection is keyed on (pk, id): a document whose key another
  // projection's document holds is refused as data, naming both (the
  // batch loop then finds the event responsible).
  const bool shared = projection.shared_collection;
  const std::string key = shared ? "((coalesce(pk, '')), id)" : "(id)";
  const std::string values =
      "x as (select * from jsonb_to_recordset($1::jsonb) as x(id text, doc jsonb, pk text,"
      " seq bigint, number bigint, lo_sort text, lo_id text, members integer, member_keys text))";
  // A document whose partition key changed moves: its row under the old
  // key goes (`moved`; that key differs from every key inserted).
  const std::string clash =
      shared ? ", clash as (select c.id, c.pk, c.projection from " + work_.Table(projection) +
                   " c join x on coalesce(c.pk, '') = coalesce(x.pk, '') and c.id = x.id"
                   " where c.projection <> $2),"
                   " moved as (delete from " + work_.Table(projection) + " c using x"
                   " where c.projection = $2 and c.id = x.id"
                   " and coalesce(c.pk, '') <> coalesce(x.pk, '')"
                   " and not exists (select 1 from clash) returning c.id, c.pk)"
             : "";
  // Change capture (published collections): the rows written go to the
  // outbox in the same statement, and so does a document that left its
  // old pk — deleted under the old key (`moved` in a shared collection;
  // in a collection of one projection with a partition key, the row keeps
  // its id and the old pk is read before the statement writes: all its
  // parts see one snapshot).
  const bool captured = work_.Captured(projection);
  const bool old_pk = !shared && work_.CapturedWithPk(projection);
  const std::string old_pks =
      old_pk ? ", o as (select c.id, c.pk from " + work_.Table(projection) +
                   " c where c.id in (select id from x))"
             : "";
  std::string capture;
  if (captured) {
    std::string changes = "select w.id, w.pk, w.doc, 1 as k from w";
    if (shared) {
      changes = "select m.id, m.pk, null::jsonb as doc, 0 as k from moved m union all " + changes;
    } else if (old_pk) {
      changes = "select o.id, o.pk, null::jsonb as doc, 0 as k from w join o on o.id = w.id"
                " where o.pk is distinct from w.pk union all " + changes;
    }
    capture = ", " + work_.CaptureCte("(" + changes + ")");
  }
  const std::string sql =
      "with " + values + clash + old_pks + ", w as (insert into " + work_.Table(projection) +
      " as c (id, doc, pk, projection, seq, number, lo_sort, lo_id, members, member_keys)"
      " select x.id, x.doc, x.pk, $2, x.seq, x.number, decode(x.lo_sort, 'hex'), x.lo_id,"
      " x.members, decode(x.member_keys, 'hex') from x" + (shared ? " where not exists (select 1 from clash)" : "") +
      " on conflict " + key + " do update set doc = excluded.doc, pk = excluded.pk,"
      " projection = excluded.projection, seq = excluded.seq, number = excluded.number,"
      " lo_sort = excluded.lo_sort, lo_id = excluded.lo_id, members = excluded.members,"
      " member_keys = excluded.member_keys"
      " where c.doc is distinct from excluded.doc or c.pk is distinct from excluded.pk"
      " or c.projection is distinct from excluded.projection"
      " or c.seq is distinct from excluded.seq or c.number is distinct from excluded.number"
      " or c.lo_sort is distinct from excluded.lo_sort"
      " or c.lo_id is distinct from excluded.lo_id"
      " or c.members is distinct from excluded.members"
      " or c.member_keys is distinct from excluded.member_keys returning " +
      (captured ? "c.id, c.pk, c.doc" : "1") + ")" + capture +
      " select (select count(*) from w)" + (shared ? " + (select count(*) from moved)" : "") +
      (shared ? ", (select id || ' (partition ' || coalesce(pk, 'none') || ') of projection '"
                " || projection from clash limit 1)"
              : "");
  // Deferred: the count is added (and a clash refuses the transaction)
  // when the statement has run, with the next read or before COMMIT.
  const std::string what = "writing documents of " + projection.name;
  work_.DocumentsWritten(projection.collection);
  PostgresWork::Deferred write{
      what, "",
      [shared, written, collection = projection.collection,
       name = projection.name](const pqxx::result& result) {
        if (shared && !result[0][1].is_null()) {
          return Status::InvalidInput(
              "collection " + collection + ": a document of " + name +
              " has the key of document " + result[0][1].c_str() +
              " (documents of a shared collection need unique (partition key, id)"
              " pairs)");
        }
        *written += result[0][0].as<uint64_t>();
        return Status::Ok();
      },
      nullptr, /*may_refuse=*/shared};
  // In statements of about kUpsertJsonBytes of rows each (a row is never
  // split): what a statement's text costs the client, three copies of it on
  // the way (the JSON, its copy by JsonText, the literal), stays that size
  // whatever the batch rewrites. The rows are unique by key, so no two
  // statements write one row; a refusal of any refuses the transaction.
  size_t next = 0;
  while (next < rows.size()) {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartArray();
    do {
      WriteDocumentRow(w, rows[next++]);
    } while (next < rows.size() && buffer.GetSize() < kUpsertJsonBytes);
    w.EndArray();
    Status queued = Guard(what, [&] {
      if (captured) {
        work_.Defer(PostgresWork::Deferred(write), sql, JsonText(buffer), projection.name,
                    projection.collection, work_.change_source());
      } else {
        work_.Defer(PostgresWork::Deferred(write), sql, JsonText(buffer), projection.name);
      }
    });
    DENORMD_RETURN_IF_ERROR(queued);
  }
  return Status::Ok();
}

Status PostgresDocumentTables::Delete(const ProjectionConfig& projection,
                                      const std::vector<std::string>& ids, uint64_t* deleted) {
  return DeleteWhere(projection, "id = any($2::text[])", PgTextArray(ids), "", deleted);
}

Status PostgresDocumentTables::DeleteByPkExcept(const ProjectionConfig& projection,
                                                const std::vector<std::string>& pks,
                                                const std::vector<std::string>& keep,
                                                uint64_t* deleted) {
  return DeleteWhere(projection, "pk = any($2::text[]) and id <> all($3::text[])",
                     PgTextArray(pks), PgTextArray(keep), deleted);
}

void PostgresDocumentTables::ReadAhead(const ProjectionConfig& projection,
                                       const std::vector<std::string>& ids) {
  const uint64_t stamp = work_.document_writes(projection.collection);
  std::vector<std::string> asked = read_[projection.name].Ask(ids, stamp);
  if (asked.empty()) return;
  work_.Defer({"loading documents of " + projection.name + " ahead", "",
               [this, asked, stamp, name = projection.name](const pqxx::result& rows) {
                 std::map<std::string, DocumentRow> found;
                 for (DocumentRow& row : DocumentRows(rows)) {
                   std::string id = row.id;
                   found[std::move(id)] = std::move(row);
                 }
                 read_[name].Arrived(asked, stamp, std::move(found));
                 return Status::Ok();
               },
               nullptr, /*may_refuse=*/false},
              LoadSql(projection, "id"), projection.name, PgTextArray(asked));
}

Status PostgresDocumentTables::Load(const ProjectionConfig& projection,
                                    const std::vector<std::string>& given,
                                    std::vector<DocumentRow>* out) {
  std::vector<std::string> ids = given;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) return Status::Ok();
  const uint64_t stamp = work_.document_writes(projection.collection);
  ReadAheadRows<std::string, DocumentRow>& read = read_[projection.name];
  bool kept = false;
  DENORMD_RETURN_IF_ERROR(read.Answers(
      ids, stamp, [&] { return work_.SendDeferred("loading documents of " + projection.name); },
      &kept));
  if (kept) {
    for (const std::string& id : ids) {
      if (const DocumentRow* row = read.Find(id)) out->push_back(*row);
    }
    return Status::Ok();
  }
  if (!read.Keeps(ids.size())) return LoadDocumentsWhere(projection, "id", ids, out);
  std::vector<DocumentRow> rows;
  DENORMD_RETURN_IF_ERROR(LoadDocumentsWhere(projection, "id", ids, &rows));
  std::map<std::string, DocumentRow> found;
  for (const DocumentRow& row : rows) found[row.id] = row;
  read.Keep(ids, stamp, std::move(found));
  out->insert(out->end(), std::make_move_iterator(rows.begin()),
              std::make_move_iterator(rows.end()));
  return Status::Ok();
}

Status PostgresDocumentTables::LoadByPk(const ProjectionConfig& projection,
                                        const std::vector<std::string>& pks,
                                        std::vector<DocumentRow>* out) {
  return LoadDocumentsWhere(projection, "pk", pks, out);
}

Status PostgresDocumentTables::ListKeys(const ProjectionConfig& projection, bool by_pk,
                                        const std::string& after, size_t limit,
                                        std::vector<std::string>* out) {
  const std::string column = by_pk ? "pk" : "id";
  return work_.ListStrings("listing documents of " + projection.name,
                          "select distinct " + column + " from " + work_.Table(projection) +
                              " where projection = $1 and " + column + " > $2 order by " + column +
                              " limit $3",
                          projection.name, after, limit, out);
}

Status PostgresDocumentTables::DeleteWhere(const ProjectionConfig& projection,
                                           const std::string& condition, const std::string& a,
                                           const std::string& b, uint64_t* deleted) {
  const std::string statement =
      "delete from " + work_.Table(projection) + " where projection = $1 and " + condition;
  // Deferred: the count is added when the statement has run.
  const std::string what = "deleting documents of " + projection.name;
  work_.DocumentsWritten(projection.collection);
  return Guard(what, [&] {
    if (!work_.Captured(projection)) {
      PostgresWork::Deferred count{what, "",
                                   [deleted](const pqxx::result& result) {
                                     *deleted += result.affected_rows();
                                     return Status::Ok();
                                   },
                                   nullptr, /*may_refuse=*/false};
      if (b.empty()) {
        work_.Defer(std::move(count), statement, projection.name, a);
      } else {
        work_.Defer(std::move(count), statement, projection.name, a, b);
      }
      return;
    }
    const int first = b.empty() ? 3 : 4;
    const std::string sql =
        "with w as (" + statement + " returning id, pk), " +
        work_.CaptureCte("(select w.id, w.pk, null::jsonb as doc, 1 as k from w)", first) +
        " select count(*) from w";
    PostgresWork::Deferred count{what, "",
                                 [deleted](const pqxx::result& result) {
                                   *deleted += result[0][0].as<uint64_t>();
                                   return Status::Ok();
                                 },
                                 nullptr, /*may_refuse=*/false};
    if (b.empty()) {
      work_.Defer(std::move(count), sql, projection.name, a, projection.collection,
                  work_.change_source());
    } else {
      work_.Defer(std::move(count), sql, projection.name, a, b, projection.collection,
                  work_.change_source());
    }
  });
}

std::string PostgresDocumentTables::LoadSql(const ProjectionConfig& projection,
                                            const std::string& column) {
  return "select id, pk, doc::text, number, seq, encode(lo_sort, 'hex'), lo_id, members,"
         " encode(member_keys, 'hex') from " +
         work_.Table(projection) + " where projection = $1 and " + column + " = any($2::text[])";
}

std::vector<DocumentRow> PostgresDocumentTables::DocumentRows(const pqxx::result& rows) {
  std::vector<DocumentRow> out;
  for (const auto& row : rows) {
    DocumentRow doc;
    doc.id = row[0].c_str();
    if (!row[1].is_null()) doc.pk = row[1].c_str();
    doc.json = row[2].c_str();
    if (!row[3].is_null()) {
      BucketMeta meta;
      meta.number = row[3].as<uint64_t>();
      meta.seq = row[4].is_null() ? 0 : row[4].as<int64_t>();
      if (!row[5].is_null()) meta.lo = IndexKey{HexDecode(row[5].c_str()), row[6].c_str()};
      meta.members = row[7].is_null() ? 0 : row[7].as<uint64_t>();
      // Unpacked where used; keys that do not unpack are as good as none.
      if (!row[8].is_null()) meta.member_keys = HexDecode(row[8].c_str());
      doc.bucket = meta;
    }
    out.push_back(std::move(doc));
  }
  return out;
}

Status PostgresDocumentTables::LoadDocumentsWhere(const ProjectionConfig& projection,
                                                  const std::string& column,
                                                  const std::vector<std::string>& values,
                                                  std::vector<DocumentRow>* out) {
  if (values.empty()) return Status::Ok();
  pqxx::result rows;
  DENORMD_RETURN_IF_ERROR(Guard("loading documents of " + projection.name, [&] {
    rows = work_.Run(LoadSql(projection, column), projection.name, PgTextArray(values));
  }));
  for (DocumentRow& doc : DocumentRows(rows)) out->push_back(std::move(doc));
  return Status::Ok();
}

}  // namespace denormd
