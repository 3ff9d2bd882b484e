/*
 * lakelog's test oracle: Apache Paimon's own Java API, driven by JSON.
 *
 * Compiled by tests/paimon_java/oracle.py with javac against paimon-bundle 1.3.0 and the Hadoop
 * client jars (no build file; see /work/notes/paimon-oracle.md). Two ways to run it:
 *
 *   java -cp ... PaimonOracle read <warehouse> <db.table> [--snapshot N]     rows as JSON lines
 *   java -cp ... PaimonOracle schema <warehouse> <db.table>                  the table schema (JSON)
 *   java -cp ... PaimonOracle create <warehouse> <db.table> <schema-json|@file>
 *   java -cp ... PaimonOracle write <warehouse> <db.table> <rows.jsonl> [--commit-kind append|overwrite]
 *   java -cp ... PaimonOracle buckets <warehouse> <db.table> <keys.jsonl>    bucket of each row
 *   java -cp ... PaimonOracle changelog <warehouse> <db.table> [--from N] [--to N]
 *   java -cp ... PaimonOracle compact <warehouse> <db.table>                 full compaction, one commit
 *   java -cp ... PaimonOracle serve                                          (also: no arguments)
 *
 * Every command may carry "catalog": an object of catalog options (a JDBC catalog's 'metastore',
 * 'uri', 'jdbc.*', 'catalog-key', ...) used beside its warehouse; "listDatabases", "listTables"
 * (database), "dropTable" and "renameTable" (table, to) work on names only.
 *
 * "serve" reads one JSON command per line on stdin ({"op": "read", "warehouse": ..., "table": ...})
 * and answers each with exactly one JSON line on stdout: {"ok": true, "result": ...} or
 * {"ok": false, "error": "...", "trace": "..."}, so one JVM serves a whole test session. Anything
 * the libraries print goes to stderr; stdout carries only the protocol.
 *
 * Value encoding (rows read and rows written alike), chosen to be exact and stable:
 *   BOOLEAN -> true/false; TINYINT..BIGINT -> JSON integers; FLOAT/DOUBLE -> JSON numbers (FLOAT widened
 *   to double exactly), "NaN"/"Infinity"/"-Infinity" as strings; DECIMAL -> string with the type's scale;
 *   CHAR/VARCHAR -> string; BINARY/VARBINARY -> base64; DATE -> "YYYY-MM-DD"; TIME -> "HH:MM:SS.mmm";
 *   TIMESTAMP(p) -> "YYYY-MM-DDTHH:MM:SS.nnnnnnnnn" (always nine fraction digits);
 *   TIMESTAMP_LTZ(p) -> the same in UTC with a trailing "Z"; ARRAY -> JSON array; MAP and MULTISET ->
 *   JSON array of [key, value] pairs in stored order; ROW -> JSON object by field name.
 * Rows written may carry "_rowkind" ("+I", "-U", "+U", "-D"); changelog rows carry "_rowkind" and
 * "_snapshot".
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import org.apache.paimon.Snapshot;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.deletionvectors.BitmapDeletionVector;
import org.apache.paimon.deletionvectors.append.BaseAppendDeleteFileMaintainer;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.index.IndexFileHandler;
import org.apache.paimon.index.IndexFileMeta;
import org.apache.paimon.io.CompactIncrement;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.io.DataIncrement;
import org.apache.paimon.manifest.FileKind;
import org.apache.paimon.manifest.IndexManifestEntry;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.options.Options;
import org.apache.paimon.predicate.Predicate;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.stats.Statistics;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.CommitMessageImpl;
import org.apache.paimon.table.sink.RowPartitionKeyExtractor;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.StreamTableScan;
import org.apache.paimon.table.source.TableRead;
import org.apache.paimon.table.source.TableScan;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;
import org.apache.paimon.utils.JsonSerdeUtil;

public final class PaimonOracle {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    /** A command failed because of what it was asked (bad table name, bad value): no stack trace. */
    static final class OracleException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        OracleException(String message) {
            super(message);
        }
    }

    private PaimonOracle() {}

    public static void main(String[] args) throws Exception {
        PrintStream protocol =
                new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length == 0 || args[0].equals("serve")) {
            serve(protocol);
            return;
        }
        int status;
        try {
            status = cli(args, protocol);
        } catch (OracleException e) {
            System.err.println("PaimonOracle: " + e.getMessage());
            status = 2;
        }
        protocol.flush();
        System.exit(status);
    }

    // ---- entry points ------------------------------------------------------------------------------

    private static void serve(PrintStream out) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode answer = NODES.objectNode();
            try {
                JsonNode command = JSON.readTree(line);
                answer.set("result", run(command));
                answer.put("ok", true);
            } catch (Throwable e) {
                answer.put("ok", false);
                answer.put("error", describe(e));
                if (!(e instanceof OracleException)) {
                    StringWriter trace = new StringWriter();
                    e.printStackTrace(new PrintWriter(trace));
                    answer.put("trace", trace.toString());
                }
            }
            out.println(JSON.writeValueAsString(answer));
            out.flush();
        }
    }

    private static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- caused by ");
            }
            sb.append(c instanceof OracleException ? "" : c.getClass().getName() + ": ");
            sb.append(c.getMessage());
            if (c.getCause() == c) {
                break;
            }
        }
        return sb.toString();
    }

    private static int cli(String[] args, PrintStream out) throws Exception {
        String op = args[0];
        ObjectNode cmd = NODES.objectNode();
        cmd.put("op", op);
        List<String> positional = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--")) {
                if (i + 1 >= args.length) {
                    throw new OracleException("option " + a + " needs a value");
                }
                String value = args[++i];
                switch (a) {
                    case "--snapshot":
                        cmd.put("snapshot", Long.parseLong(value));
                        break;
                    case "--from":
                        cmd.put("fromSnapshot", Long.parseLong(value));
                        break;
                    case "--to":
                        cmd.put("toSnapshot", Long.parseLong(value));
                        break;
                    case "--commit-kind":
                        cmd.put("commitKind", value);
                        break;
                    default:
                        throw new OracleException("unknown option " + a);
                }
            } else {
                positional.add(a);
            }
        }
        if (positional.size() < 2) {
            throw new OracleException("usage: " + op + " <warehouse> <db.table> ...");
        }
        cmd.put("warehouse", positional.get(0));
        cmd.put("table", positional.get(1));
        String third = positional.size() > 2 ? positional.get(2) : null;
        switch (op) {
            case "create":
                if (third == null) {
                    throw new OracleException("usage: create <warehouse> <db.table> <schema-json|@file>");
                }
                String text = third.startsWith("@")
                        ? Files.readString(Paths.get(third.substring(1)), StandardCharsets.UTF_8)
                        : third;
                ((ObjectNode) JSON.readTree(text)).fields()
                        .forEachRemaining(e -> cmd.set(e.getKey(), e.getValue()));
                break;
            case "write":
            case "buckets":
                if (third == null) {
                    throw new OracleException("usage: " + op + " <warehouse> <db.table> <rows.jsonl>");
                }
                cmd.put("file", third);
                break;
            default:
                break;
        }
        JsonNode result = run(cmd);
        if (result.isArray()) {
            ArrayNode rows = (ArrayNode) result;
            if (op.equals("buckets")) {
                ArrayNode keys = readRows(cmd);
                for (int i = 0; i < rows.size(); i++) {
                    ObjectNode line = NODES.objectNode();
                    line.set("_bucket", rows.get(i));
                    line.setAll((ObjectNode) keys.get(i));
                    out.println(JSON.writeValueAsString(line));
                }
            } else {
                for (JsonNode row : rows) {
                    out.println(JSON.writeValueAsString(row));
                }
            }
        } else {
            out.println(JSON.writeValueAsString(result));
        }
        return 0;
    }

    private static JsonNode run(JsonNode cmd) throws Exception {
        String op = text(cmd, "op");
        if (op.equals("ping")) {
            ObjectNode pong = NODES.objectNode();
            pong.put("java", System.getProperty("java.version"));
            return pong;
        }
        try (Catalog catalog = catalog(text(cmd, "warehouse"), cmd.get("catalog"))) {
            switch (op) {
                case "listDatabases":
                    return strings(catalog.listDatabases());
                case "listTables":
                    return strings(catalog.listTables(text(cmd, "database")));
                case "dropTable":
                    catalog.dropTable(Identifier.fromString(text(cmd, "table")), false);
                    return NODES.nullNode();
                case "renameTable":
                    catalog.renameTable(
                            Identifier.fromString(text(cmd, "table")),
                            Identifier.fromString(text(cmd, "to")),
                            false);
                    return NODES.nullNode();
                case "read":
                    return read(catalog, cmd);
                case "schema":
                    return schema(catalog, cmd);
                case "create":
                    return create(catalog, cmd);
                case "write":
                    return write(catalog, cmd);
                case "buckets":
                    return buckets(catalog, cmd);
                case "changelog":
                    return changelog(catalog, cmd);
                case "compact":
                    return compact(catalog, cmd);
                case "deleteAppend":
                    return deleteAppend(catalog, cmd);
                case "plan":
                    return plan(catalog, cmd);
                case "updateStatistics":
                    return updateStatistics(catalog, cmd);
                default:
                    throw new OracleException("unknown op " + op);
            }
        }
    }

    // ---- commands ----------------------------------------------------------------------------------

    private static ArrayNode strings(List<String> names) {
        ArrayNode out = NODES.arrayNode();
        names.stream().sorted().forEach(out::add);
        return out;
    }

    private static Catalog catalog(String warehouse, JsonNode extra) {
        Options options = new Options();
        if (extra != null && extra.isObject()) {
            extra.fields().forEachRemaining(e -> options.set(e.getKey(), e.getValue().asText()));
        }
        options.set("warehouse", warehouse);
        // every command sees the files as they are now (lakelog writes the same warehouse in between)
        options.set("cache-enabled", "false");
        return CatalogFactory.createCatalog(CatalogContext.create(options));
    }

    private static Table table(Catalog catalog, JsonNode cmd) throws Exception {
        String name = text(cmd, "table");
        try {
            Table t = catalog.getTable(Identifier.fromString(name));
            Map<String, String> dynamic = new HashMap<>();
            if (cmd.hasNonNull("snapshot")) {
                dynamic.put("scan.snapshot-id", String.valueOf(cmd.get("snapshot").asLong()));
            }
            JsonNode extra = cmd.get("options");
            if (extra != null && extra.isObject()) {
                extra.fields().forEachRemaining(e -> dynamic.put(e.getKey(), e.getValue().asText()));
            }
            return dynamic.isEmpty() ? t : t.copy(dynamic);
        } catch (Catalog.TableNotExistException e) {
            throw new OracleException("table " + name + " does not exist");
        }
    }

    private static ArrayNode read(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        ReadBuilder rb = t.newReadBuilder();
        RowType type = t.rowType();
        JsonNode columns = cmd.get("columns");
        if (columns != null && columns.isArray()) {
            List<String> names = new ArrayList<>();
            columns.forEach(c -> names.add(c.asText()));
            type = type.project(names);
            rb = rb.withReadType(type);
        }
        ArrayNode rows = NODES.arrayNode();
        RowType rowType = type;
        TableRead read = rb.newRead();
        List<Split> splits = rb.newScan().plan().splits();
        try (RecordReader<InternalRow> reader = read.createReader(splits)) {
            reader.forEachRemaining(row -> rows.add(encodeRow(row, rowType)));
        }
        return rows;
    }

    /** The data files a read with {@code column = value} (or {@code IN values}) plans: Paimon skips files by their stats and embedded file indexes here. */
    private static JsonNode plan(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        RowType type = t.rowType();
        String column = text(cmd, "column");
        int idx = type.getFieldIndex(column);
        if (idx < 0) {
            throw new OracleException("plan: no column " + column);
        }
        DataType ft = type.getTypeAt(idx);
        List<Object> values = new ArrayList<>();
        for (JsonNode v : cmd.get("values")) {
            values.add(decode(v, ft, "plan value"));
        }
        PredicateBuilder pb = new PredicateBuilder(type);
        Predicate p = values.size() == 1 ? pb.equal(idx, values.get(0)) : pb.in(idx, values);
        int files = 0;
        for (Split s : t.newReadBuilder().withFilter(p).newScan().plan().splits()) {
            files += ((DataSplit) s).dataFiles().size();
        }
        ObjectNode out = NODES.objectNode();
        out.put("files", files);
        return out;
    }

    private static JsonNode schema(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        if (t instanceof FileStoreTable) {
            return JSON.readTree(JsonSerdeUtil.toJson(((FileStoreTable) t).schema()));
        }
        ObjectNode out = NODES.objectNode();
        ArrayNode fields = out.putArray("fields");
        for (DataField f : t.rowType().getFields()) {
            fields.addObject().put("id", f.id()).put("name", f.name()).put("type", f.type().toString());
        }
        return out;
    }

    private static JsonNode create(Catalog catalog, JsonNode cmd) throws Exception {
        String name = text(cmd, "table");
        Identifier id = Identifier.fromString(name);
        Schema.Builder b = Schema.newBuilder();
        JsonNode fields = cmd.get("fields");
        if (fields == null || !fields.isArray() || fields.size() == 0) {
            throw new OracleException("create: 'fields' must be a non-empty list of {name, type}");
        }
        for (JsonNode f : fields) {
            DataType type = DataTypeJsonParser.parseDataType(f.get("type"));
            JsonNode desc = f.get("description");
            b.column(text(f, "name"), type, desc == null || desc.isNull() ? null : desc.asText());
        }
        b.primaryKey(strings(cmd.get("primaryKeys")));
        b.partitionKeys(strings(cmd.get("partitionKeys")));
        JsonNode options = cmd.get("options");
        if (options != null && options.isObject()) {
            options.fields().forEachRemaining(e -> b.option(e.getKey(), e.getValue().asText()));
        }
        if (cmd.hasNonNull("comment")) {
            b.comment(cmd.get("comment").asText());
        }
        catalog.createDatabase(id.getDatabaseName(), true);
        catalog.createTable(id, b.build(), cmd.path("ignoreIfExists").asBoolean(false));
        return schema(catalog, cmd);
    }

    /** A writer with a temp directory: lookups (deletion vectors, the lookup changelog producer) spill there. */
    private static BatchTableWrite withDisk(BatchTableWrite w) {
        return (BatchTableWrite) w.withIOManager(IOManager.create(System.getProperty("java.io.tmpdir")));
    }

    private static JsonNode write(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        RowType type = t.rowType();
        ArrayNode rows = readRows(cmd);
        BatchWriteBuilder builder = t.newBatchWriteBuilder();
        String kind = cmd.hasNonNull("commitKind") ? cmd.get("commitKind").asText() : "append";
        if (kind.equalsIgnoreCase("overwrite")) {
            Map<String, String> partition = new LinkedHashMap<>();
            JsonNode p = cmd.get("overwritePartition");
            if (p != null && p.isObject()) {
                p.fields().forEachRemaining(e -> partition.put(e.getKey(), e.getValue().asText()));
            }
            builder = builder.withOverwrite(partition);
        } else if (!kind.equalsIgnoreCase("append")) {
            throw new OracleException("commitKind must be append or overwrite, not " + kind);
        }
        // dynamic bucket mode: the batch writer cannot place keys itself ("Can't extract bucket from
        // row in dynamic bucket mode"); Paimon's engines put a HashBucketAssigner (one assigner
        // here) before TableWrite.write(row, bucket), and so does this oracle
        HashBucketAssigner assigner = null;
        RowPartitionKeyExtractor keys = null;
        if (t instanceof FileStoreTable && ((FileStoreTable) t).bucketMode() == BucketMode.HASH_DYNAMIC) {
            FileStoreTable ft = (FileStoreTable) t;
            Integer maxBuckets = ft.coreOptions().dynamicBucketMaxBuckets();
            assigner = new HashBucketAssigner(ft.snapshotManager(), "paimon-oracle",
                    ft.store().newIndexFileHandler(), 1, 1, 0, ft.coreOptions().dynamicBucketTargetRowNum(),
                    maxBuckets == null ? -1 : maxBuckets);
            keys = new RowPartitionKeyExtractor(ft.schema());
        }
        try (BatchTableWrite w = withDisk(builder.newWrite()); BatchTableCommit c = builder.newCommit()) {
            for (int i = 0; i < rows.size(); i++) {
                InternalRow row = decodeRow(rows.get(i), type, "row " + i);
                if (assigner == null) {
                    w.write(row);
                } else {
                    BinaryRow partition = keys.partition(row);
                    w.write(row, assigner.assign(partition, keys.trimmedPrimaryKey(row).hashCode()));
                }
            }
            c.commit(w.prepareCommit());
        }
        return latest(catalog, cmd);
    }

    private static JsonNode latest(Catalog catalog, JsonNode cmd) throws Exception {
        ObjectNode out = NODES.objectNode();
        Table fresh = catalog.getTable(Identifier.fromString(text(cmd, "table")));
        out.put("snapshot", fresh.latestSnapshot().map(s -> s.id()).orElse(null));
        return out;
    }

    private static ArrayNode buckets(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        RowType type = t.rowType();
        ArrayNode rows = readRows(cmd);
        ArrayNode out = NODES.arrayNode();
        try (BatchTableWrite w = withDisk(t.newBatchWriteBuilder().newWrite())) {
            for (int i = 0; i < rows.size(); i++) {
                out.add(w.getBucket(decodeRow(rows.get(i), type, "row " + i)));
            }
        }
        return out;
    }

    private static ArrayNode changelog(Catalog catalog, JsonNode cmd) throws Exception {
        Table base = table(catalog, cmd);
        Map<String, String> scanOptions = new HashMap<>();
        if (cmd.hasNonNull("fromSnapshot")) {
            // the changes of snapshot N onwards (no full read of N first)
            scanOptions.put("scan.mode", "from-snapshot");
            scanOptions.put("scan.snapshot-id", String.valueOf(cmd.get("fromSnapshot").asLong()));
        }
        Table t = scanOptions.isEmpty() ? base : base.copy(scanOptions);
        Long latestId = t.latestSnapshot().map(s -> s.id()).orElse(null);
        ArrayNode rows = NODES.arrayNode();
        if (latestId == null) {
            return rows;
        }
        long to = cmd.hasNonNull("toSnapshot") ? cmd.get("toSnapshot").asLong() : latestId;
        RowType type = t.rowType();
        ReadBuilder rb = t.newReadBuilder();
        StreamTableScan scan = rb.newStreamScan();
        TableRead read = rb.newRead();
        // each plan() covers one snapshot (the first may be a full read); stop past 'to' or when stuck
        for (long guard = 0; guard <= to + 2; guard++) {
            Long before = scan.checkpoint();
            TableScan.Plan plan = scan.plan();
            Long after = scan.checkpoint();
            long snapshot = after == null ? -1 : after - 1;
            if (after != null && snapshot > to) {
                break;
            }
            try (RecordReader<InternalRow> reader = read.createReader(plan.splits())) {
                reader.forEachRemaining(row -> {
                    ObjectNode r = NODES.objectNode();
                    r.put("_rowkind", row.getRowKind().shortString());
                    r.put("_snapshot", snapshot);
                    r.setAll(encodeRow(row, type));
                    rows.add(r);
                });
            }
            if (after == null || after > to || Objects.equals(before, after)) {
                break;
            }
        }
        return rows;
    }

    private static JsonNode compact(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        BatchWriteBuilder builder = t.newBatchWriteBuilder();
        boolean full = cmd.path("full").asBoolean(true);
        Set<List<Object>> done = new HashSet<>();
        try (BatchTableWrite w = withDisk(builder.newWrite()); BatchTableCommit c = builder.newCommit()) {
            for (Split s : t.newReadBuilder().newScan().plan().splits()) {
                if (!(s instanceof DataSplit)) {
                    throw new OracleException("compact: unexpected split " + s.getClass().getName());
                }
                DataSplit ds = (DataSplit) s;
                BinaryRow partition = ds.partition();
                if (done.add(List.of(partition, ds.bucket()))) {
                    w.compact(partition, ds.bucket(), full);
                }
            }
            c.commit(w.prepareCommit());
        }
        return latest(catalog, cmd);
    }

    /**
     * Commits {@code statistics} (Paimon's statistics JSON) as Paimon's Flink and Spark ANALYZE do:
     * {@code BatchTableCommit.updateStatistics}, an ANALYZE snapshot naming a new statistics file.
     */
    private static JsonNode updateStatistics(Catalog catalog, JsonNode cmd) throws Exception {
        Table t = table(catalog, cmd);
        Statistics stats = Statistics.fromJson(JSON.writeValueAsString(cmd.get("statistics")));
        try (BatchTableCommit c = t.newBatchWriteBuilder().newCommit()) {
            c.updateStatistics(stats);
        }
        return latest(catalog, cmd);
    }

    /**
     * Deletes the rows of an append table with deletion vectors whose BIGINT column {@code column}
     * holds one of {@code values}, as Paimon's Spark DELETE does: each data file is read alone, in
     * file order, the positions of its matching rows go into a deletion vector, and Paimon's
     * append deletion-file maintainer (bucketed, or unaware-bucket) writes the index files, committed
     * as a data increment without data files.
     */
    private static JsonNode deleteAppend(Catalog catalog, JsonNode cmd) throws Exception {
        FileStoreTable t = (FileStoreTable) table(catalog, cmd);
        String column = text(cmd, "column");
        Set<Long> values = new HashSet<>();
        cmd.get("values").forEach(v -> values.add(v.asLong()));
        int at = t.rowType().getFieldNames().indexOf(column);
        if (at < 0) {
            throw new OracleException("deleteAppend: no column " + column);
        }
        Snapshot snapshot = t.snapshotManager().latestSnapshot();
        IndexFileHandler handler = t.store().newIndexFileHandler();
        boolean unaware = t.bucketMode() == BucketMode.BUCKET_UNAWARE;
        Map<List<Object>, BaseAppendDeleteFileMaintainer> maintainers = new LinkedHashMap<>();
        Map<List<Object>, Integer> totals = new HashMap<>();
        for (Split s : t.newReadBuilder().newScan().plan().splits()) {
            DataSplit ds = (DataSplit) s;
            for (DataFileMeta f : ds.dataFiles()) {
                DataSplit one = new DataSplit.Builder().withSnapshot(ds.snapshotId()).withPartition(ds.partition())
                        .withBucket(ds.bucket()).withBucketPath(ds.bucketPath()).withTotalBuckets(ds.totalBuckets())
                        .withDataFiles(List.of(f)).rawConvertible(true).build();
                BitmapDeletionVector dv = new BitmapDeletionVector();
                TableRead read = t.newReadBuilder().withProjection(new int[] {at}).newRead();
                long[] position = {0};
                try (RecordReader<InternalRow> reader = read.createReader(one)) {
                    reader.forEachRemaining(row -> {
                        if (!row.isNullAt(0) && values.contains(row.getLong(0))) {
                            dv.delete(position[0]);
                        }
                        position[0]++;
                    });
                }
                if (dv.isEmpty()) {
                    continue;
                }
                int bucket = unaware ? 0 : ds.bucket();
                List<Object> key = List.of(ds.partition(), bucket);
                totals.put(key, ds.totalBuckets());
                BaseAppendDeleteFileMaintainer m = maintainers.get(key);
                if (m == null) {
                    m = unaware
                            ? BaseAppendDeleteFileMaintainer.forUnawareAppend(handler, snapshot, ds.partition())
                            : BaseAppendDeleteFileMaintainer.forBucketedAppend(handler, snapshot, ds.partition(), bucket);
                    maintainers.put(key, m);
                }
                m.notifyNewDeletionVector(f.fileName(), dv);
            }
        }
        List<CommitMessage> messages = new ArrayList<>();
        for (Map.Entry<List<Object>, BaseAppendDeleteFileMaintainer> e : maintainers.entrySet()) {
            List<IndexFileMeta> added = new ArrayList<>();
            List<IndexFileMeta> deleted = new ArrayList<>();
            for (IndexManifestEntry ie : e.getValue().persist()) {
                (ie.kind() == FileKind.ADD ? added : deleted).add(ie.indexFile());
            }
            BaseAppendDeleteFileMaintainer m = e.getValue();
            messages.add(new CommitMessageImpl(m.getPartition(), m.getBucket(), totals.get(e.getKey()),
                    new DataIncrement(List.of(), List.of(), List.of(), added, deleted), CompactIncrement.emptyIncrement()));
        }
        if (!messages.isEmpty()) {
            try (BatchTableCommit c = t.newBatchWriteBuilder().newCommit()) {
                c.commit(messages);
            }
        }
        return latest(catalog, cmd);
    }

    // ---- JSON helpers ------------------------------------------------------------------------------

    private static String text(JsonNode node, String field) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) {
            throw new OracleException("missing '" + field + "'");
        }
        return v.asText();
    }

    private static List<String> strings(JsonNode node) {
        List<String> out = new ArrayList<>();
        if (node != null && node.isArray()) {
            node.forEach(n -> out.add(n.asText()));
        }
        return out;
    }

    /** The command's rows: inline under "rows", or one JSON object per line of the file "file". */
    private static ArrayNode readRows(JsonNode cmd) throws Exception {
        if (cmd.has("rows")) {
            JsonNode rows = cmd.get("rows");
            if (!rows.isArray()) {
                throw new OracleException("'rows' must be a list of objects");
            }
            return (ArrayNode) rows;
        }
        ArrayNode rows = NODES.arrayNode();
        for (String line : Files.readAllLines(Paths.get(text(cmd, "file")), StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                rows.add(JSON.readTree(line));
            }
        }
        return rows;
    }

    // ---- Paimon values -> JSON ---------------------------------------------------------------------

    private static ObjectNode encodeRow(InternalRow row, RowType type) {
        ObjectNode out = NODES.objectNode();
        List<DataField> fields = type.getFields();
        for (int i = 0; i < fields.size(); i++) {
            DataField f = fields.get(i);
            Object v = InternalRow.createFieldGetter(f.type(), i).getFieldOrNull(row);
            out.set(f.name(), encode(v, f.type()));
        }
        return out;
    }

    private static JsonNode encode(Object v, DataType type) {
        if (v == null) {
            return NODES.nullNode();
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                return NODES.booleanNode((Boolean) v);
            case TINYINT:
                return NODES.numberNode((Byte) v);
            case SMALLINT:
                return NODES.numberNode((Short) v);
            case INTEGER:
                return NODES.numberNode((Integer) v);
            case BIGINT:
                return NODES.numberNode((Long) v);
            case FLOAT:
                return encodeDouble((double) (Float) v);
            case DOUBLE:
                return encodeDouble((Double) v);
            case DECIMAL:
                return NODES.textNode(((Decimal) v).toBigDecimal().toPlainString());
            case CHAR:
            case VARCHAR:
                return NODES.textNode(v.toString());
            case BINARY:
            case VARBINARY:
                return NODES.textNode(Base64.getEncoder().encodeToString((byte[]) v));
            case DATE:
                return NODES.textNode(LocalDate.ofEpochDay((Integer) v).toString());
            case TIME_WITHOUT_TIME_ZONE:
                return NODES.textNode(formatTime((Integer) v));
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return NODES.textNode(formatTimestamp((Timestamp) v));
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return NODES.textNode(formatTimestamp((Timestamp) v) + "Z");
            case ARRAY: {
                DataType element = ((ArrayType) type).getElementType();
                return encodeArray((InternalArray) v, element);
            }
            case MAP: {
                MapType m = (MapType) type;
                return encodeMap((InternalMap) v, m.getKeyType(), m.getValueType());
            }
            case MULTISET: {
                DataType element = ((MultisetType) type).getElementType();
                return encodeMap((InternalMap) v, element, new org.apache.paimon.types.IntType(false));
            }
            case ROW:
                return encodeRow((InternalRow) v, (RowType) type);
            default:
                return NODES.textNode(v.toString());
        }
    }

    private static JsonNode encodeDouble(double d) {
        if (Double.isNaN(d)) {
            return NODES.textNode("NaN");
        }
        if (Double.isInfinite(d)) {
            return NODES.textNode(d > 0 ? "Infinity" : "-Infinity");
        }
        return NODES.numberNode(d);
    }

    private static ArrayNode encodeArray(InternalArray array, DataType element) {
        ArrayNode out = NODES.arrayNode();
        InternalArray.ElementGetter getter = InternalArray.createElementGetter(element);
        for (int i = 0; i < array.size(); i++) {
            out.add(encode(getter.getElementOrNull(array, i), element));
        }
        return out;
    }

    private static ArrayNode encodeMap(InternalMap map, DataType keyType, DataType valueType) {
        ArrayNode keys = encodeArray(map.keyArray(), keyType);
        ArrayNode values = encodeArray(map.valueArray(), valueType);
        ArrayNode out = NODES.arrayNode();
        for (int i = 0; i < keys.size(); i++) {
            out.addArray().add(keys.get(i)).add(values.get(i));
        }
        return out;
    }

    static String formatTime(int millisOfDay) {
        LocalTime t = LocalTime.ofNanoOfDay(millisOfDay * 1_000_000L);
        return String.format("%02d:%02d:%02d.%03d", t.getHour(), t.getMinute(), t.getSecond(),
                t.getNano() / 1_000_000);
    }

    static String formatTimestamp(Timestamp ts) {
        long millis = ts.getMillisecond();
        long seconds = Math.floorDiv(millis, 1000L);
        int nanos = (int) Math.floorMod(millis, 1000L) * 1_000_000 + ts.getNanoOfMillisecond();
        LocalDateTime t = LocalDateTime.ofEpochSecond(seconds, nanos, ZoneOffset.UTC);
        return String.format("%sT%02d:%02d:%02d.%09d", t.toLocalDate(), t.getHour(), t.getMinute(),
                t.getSecond(), t.getNano());
    }

    // ---- JSON -> Paimon values ---------------------------------------------------------------------

    private static GenericRow decodeRow(JsonNode json, RowType type, String where) {
        if (!json.isObject()) {
            throw new OracleException(where + ": expected a JSON object, got " + json);
        }
        RowKind kind = RowKind.INSERT;
        JsonNode k = json.get("_rowkind");
        if (k != null && !k.isNull()) {
            try {
                kind = RowKind.fromShortString(k.asText());
            } catch (RuntimeException e) {
                throw new OracleException(where + ": bad _rowkind " + k);
            }
        }
        Set<String> known = new HashSet<>(type.getFieldNames());
        for (Iterator<String> it = json.fieldNames(); it.hasNext(); ) {
            String name = it.next();
            if (!name.equals("_rowkind") && !known.contains(name)) {
                throw new OracleException(where + ": the table has no field '" + name + "'");
            }
        }
        List<DataField> fields = type.getFields();
        GenericRow row = new GenericRow(kind, fields.size());
        for (int i = 0; i < fields.size(); i++) {
            DataField f = fields.get(i);
            row.setField(i, decode(json.get(f.name()), f.type(), where + "." + f.name()));
        }
        return row;
    }

    private static Object decode(JsonNode v, DataType type, String where) {
        if (v == null || v.isNull()) {
            return null;
        }
        try {
            return decodeValue(v, type, where);
        } catch (OracleException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new OracleException(where + ": cannot read " + v + " as " + type + ": " + e);
        }
    }

    private static Object decodeValue(JsonNode v, DataType type, String where) {
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                if (!v.isBoolean()) {
                    throw new OracleException(where + ": expected true/false, got " + v);
                }
                return v.booleanValue();
            case TINYINT:
                return (byte) integral(v, where, Byte.MIN_VALUE, Byte.MAX_VALUE);
            case SMALLINT:
                return (short) integral(v, where, Short.MIN_VALUE, Short.MAX_VALUE);
            case INTEGER:
                return (int) integral(v, where, Integer.MIN_VALUE, Integer.MAX_VALUE);
            case BIGINT:
                return integral(v, where, Long.MIN_VALUE, Long.MAX_VALUE);
            case FLOAT:
                return (float) floating(v, where);
            case DOUBLE:
                return floating(v, where);
            case DECIMAL: {
                DecimalType d = (DecimalType) type;
                BigDecimal bd = v.isTextual() ? new BigDecimal(v.asText()) : v.decimalValue();
                try {
                    bd = bd.setScale(d.getScale(), RoundingMode.UNNECESSARY);
                } catch (ArithmeticException e) {
                    throw new OracleException(where + ": " + v + " has more digits than scale "
                            + d.getScale());
                }
                Decimal dec = Decimal.fromBigDecimal(bd, d.getPrecision(), d.getScale());
                if (dec == null) {
                    throw new OracleException(where + ": " + v + " does not fit " + type);
                }
                return dec;
            }
            case CHAR:
            case VARCHAR:
                return BinaryString.fromString(v.asText());
            case BINARY:
            case VARBINARY:
                return Base64.getDecoder().decode(v.asText());
            case DATE:
                return v.isIntegralNumber() ? v.intValue() : (int) LocalDate.parse(v.asText()).toEpochDay();
            case TIME_WITHOUT_TIME_ZONE:
                return v.isIntegralNumber()
                        ? v.intValue()
                        : (int) (LocalTime.parse(v.asText()).toNanoOfDay() / 1_000_000L);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return Timestamp.fromLocalDateTime(LocalDateTime.parse(stripZone(v.asText())));
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return timestampOf(instant(v.asText()));
            case ARRAY: {
                DataType element = ((ArrayType) type).getElementType();
                Object[] items = new Object[v.size()];
                for (int i = 0; i < v.size(); i++) {
                    items[i] = decode(v.get(i), element, where + "[" + i + "]");
                }
                return new GenericArray(items);
            }
            case MAP: {
                MapType m = (MapType) type;
                return decodeMap(v, m.getKeyType(), m.getValueType(), where);
            }
            case MULTISET: {
                DataType element = ((MultisetType) type).getElementType();
                return decodeMap(v, element, new org.apache.paimon.types.IntType(false), where);
            }
            case ROW:
                return decodeRow(v, (RowType) type, where);
            default:
                throw new OracleException(where + ": writing " + type + " is not supported");
        }
    }

    private static long integral(JsonNode v, String where, long min, long max) {
        if (!v.isIntegralNumber() || !v.canConvertToLong()) {
            throw new OracleException(where + ": expected an integer, got " + v);
        }
        long x = v.longValue();
        if (x < min || x > max) {
            throw new OracleException(where + ": " + x + " is out of range");
        }
        return x;
    }

    private static double floating(JsonNode v, String where) {
        if (v.isNumber()) {
            return v.doubleValue();
        }
        switch (v.asText()) {
            case "NaN":
                return Double.NaN;
            case "Infinity":
                return Double.POSITIVE_INFINITY;
            case "-Infinity":
                return Double.NEGATIVE_INFINITY;
            default:
                throw new OracleException(where + ": expected a number, got " + v);
        }
    }

    private static String stripZone(String s) {
        String t = s.replace(' ', 'T');
        return t.endsWith("Z") ? t.substring(0, t.length() - 1) : t;
    }

    private static Instant instant(String s) {
        String t = s.replace(' ', 'T');
        if (t.endsWith("Z")) {
            return Instant.parse(t);
        }
        if (t.length() > 19 && (t.lastIndexOf('+') > 10 || t.lastIndexOf('-') > 10)) {
            return OffsetDateTime.parse(t).toInstant();
        }
        return LocalDateTime.parse(t).toInstant(ZoneOffset.UTC);
    }

    private static Timestamp timestampOf(Instant i) {
        long millis = Math.addExact(Math.multiplyExact(i.getEpochSecond(), 1000L), i.getNano() / 1_000_000);
        return Timestamp.fromEpochMillis(millis, i.getNano() % 1_000_000);
    }

    private static GenericMap decodeMap(JsonNode v, DataType keyType, DataType valueType, String where) {
        Map<Object, Object> out = new LinkedHashMap<>();
        if (v.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = v.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                out.put(decode(NODES.textNode(e.getKey()), keyType, where + ".key"),
                        decode(e.getValue(), valueType, where + "[" + e.getKey() + "]"));
            }
        } else if (v.isArray()) {
            for (int i = 0; i < v.size(); i++) {
                JsonNode pair = v.get(i);
                if (!pair.isArray() || pair.size() != 2) {
                    throw new OracleException(where + ": map entries are [key, value] pairs, got " + pair);
                }
                out.put(decode(pair.get(0), keyType, where + ".key"),
                        decode(pair.get(1), valueType, where + "[" + i + "]"));
            }
        } else {
            throw new OracleException(where + ": expected a map as [[key, value], ...], got " + v);
        }
        return new GenericMap(out);
    }
}
