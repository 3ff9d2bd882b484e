package lakelog.flink;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.lang.reflect.Array;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;

import org.apache.flink.api.python.shaded.org.apache.arrow.memory.BufferAllocator;
import org.apache.flink.api.python.shaded.org.apache.arrow.memory.RootAllocator;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.BigIntVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.BitVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.DateDayVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.DecimalVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.FieldVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.Float4Vector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.Float8Vector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.IntVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.SmallIntVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.TimeMilliVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.TimeStampVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.TinyIntVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.complex.ListVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.complex.StructVector;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.DateUnit;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.TimeUnit;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.pojo.Field;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.flink.api.python.shaded.org.apache.arrow.vector.types.pojo.Schema;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

/**
 * The first stage of the lakelog sink: gathers rows (with their RowKind) into Arrow record
 * batches in the table's own Arrow types and hands each batch on as one Arrow IPC stream.
 *
 * <p>PyFlink's per-record hand-over between Java and Python is what limits a Python sink, so rows
 * cross into Python only as whole batches. A batch is emitted when it holds {@code maxRows} rows or
 * about {@code maxBytes} bytes, every {@code flushMs} milliseconds, before every checkpoint barrier
 * (followed by a flush marker; so the operator has no state of its own: everything before a barrier
 * is downstream of it), before the final watermark (also followed by a marker) and at end of input.
 *
 * <p>Column {@code i} of the table is field {@code inputIndex[i]} of the input row. Types are
 * spelled as in {@link #field}. With a {@code kindField}, a trailing int8 column holds each row's
 * RowKind byte (0 +I, 1 -U, 2 +U, 3 -D); without it, any row that is not +I fails the job.
 */
public class RowBatcher extends AbstractStreamOperator<byte[]>
        implements OneInputStreamOperator<Row, byte[]>, BoundedOneInput {

    private static final long serialVersionUID = 1L;
    private static final long MILLIS_PER_DAY = 86_400_000L;

    private final String table;
    private final String[] names;
    private final String[] types;
    private final boolean[] nullable;
    private final int[] inputIndex;
    private final String kindField;
    private final boolean dropUpdateBefore;
    private final long flushMs;
    private final int maxRows;
    private final long maxBytes;

    private transient BufferAllocator allocator;
    private transient VectorSchemaRoot root;
    private transient List<Column> columns;
    private transient TinyIntVector kinds;
    private transient int rows;
    private transient long bytes;

    /**
     * @param kindField name of the RowKind column, or null for an insert-only input
     */
    public RowBatcher(
            String table,
            String[] names,
            String[] types,
            boolean[] nullable,
            int[] inputIndex,
            String kindField,
            boolean dropUpdateBefore,
            long flushMs,
            int maxRows,
            long maxBytes) {
        this.table = table;
        this.names = names;
        this.types = types;
        this.nullable = nullable;
        this.inputIndex = inputIndex;
        this.kindField = kindField;
        this.dropUpdateBefore = dropUpdateBefore;
        this.flushMs = flushMs;
        this.maxRows = maxRows;
        this.maxBytes = maxBytes;
        for (int i = 0; i < types.length; i++) {
            field(names[i], types[i], true); // fail on the client, naming the column
        }
    }

    /**
     * The Arrow field of a column: {@code code} is an atomic type code (see {@link #arrowType}) or
     * a nested one, {@code list(CHILD)}, {@code map(CHILD,CHILD)} (key, value) or
     * {@code row(CHILD,...)}, where a CHILD is {@code HEXNAME~n~CODE} (nullable) or
     * {@code HEXNAME~r~CODE} (required), the name's UTF-8 bytes in hex.
     */
    static Field field(String name, String code, boolean nullable) {
        if (code.startsWith("list(")) {
            List<Field> children = children(name, inner(code, "list("));
            return new Field(name, new FieldType(nullable, ArrowType.List.INSTANCE, null), children);
        }
        if (code.startsWith("map(")) {
            List<Field> kv = children(name, inner(code, "map("));
            Field entries = new Field("entries", FieldType.notNullable(ArrowType.Struct.INSTANCE), kv);
            List<Field> one = new ArrayList<>();
            one.add(entries);
            return new Field(name, new FieldType(nullable, new ArrowType.Map(false), null), one);
        }
        if (code.startsWith("row(")) {
            List<Field> children = children(name, inner(code, "row("));
            return new Field(name, new FieldType(nullable, ArrowType.Struct.INSTANCE, null), children);
        }
        return new Field(name, new FieldType(nullable, arrowType(name, code), null), null);
    }

    private static String inner(String code, String head) {
        if (!code.endsWith(")")) {
            throw new IllegalArgumentException("bad nested type code " + code);
        }
        return code.substring(head.length(), code.length() - 1);
    }

    /** The fields of a comma-separated CHILD list (commas inside parentheses belong to children). */
    private static List<Field> children(String column, String list) {
        List<Field> out = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i <= list.length(); i++) {
            char c = i < list.length() ? list.charAt(i) : ',';
            if (c == '(') {
                depth++;
            } else if (c == ')') {
                depth--;
            } else if (c == ',' && depth == 0) {
                String child = list.substring(start, i);
                String[] p = child.split("~", 3);
                if (p.length != 3) {
                    throw new IllegalArgumentException("column '" + column + "': bad nested type code " + child);
                }
                out.add(field(unhex(p[0]), p[2], p[1].equals("n")));
                start = i + 1;
            }
        }
        return out;
    }

    private static String unhex(String hex) {
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** The Arrow type of a column type code: bool, i8, i16, i32, i64, f32, f64, str, bin, date,
     * time (time32[ms]), dec:P:S, ts:UNIT or tsz:UNIT (with time zone UTC); UNIT is s, ms, us, ns. */
    static ArrowType arrowType(String column, String code) {
        String[] p = code.split(":");
        switch (p[0]) {
            case "bool": return ArrowType.Bool.INSTANCE;
            case "i8": return new ArrowType.Int(8, true);
            case "i16": return new ArrowType.Int(16, true);
            case "i32": return new ArrowType.Int(32, true);
            case "i64": return new ArrowType.Int(64, true);
            case "f32": return new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE);
            case "f64": return new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE);
            case "str": return ArrowType.Utf8.INSTANCE;
            case "bin": return ArrowType.Binary.INSTANCE;
            case "date": return new ArrowType.Date(DateUnit.DAY);
            case "time": return new ArrowType.Time(TimeUnit.MILLISECOND, 32);
            case "dec":
                return new ArrowType.Decimal(Integer.parseInt(p[1]), Integer.parseInt(p[2]), 128);
            case "ts":
            case "tsz":
                return new ArrowType.Timestamp(timeUnit(p[1]), p[0].equals("tsz") ? "UTC" : null);
            default:
                throw new IllegalArgumentException(
                        "column '" + column + "': the lakelog sink cannot carry type code " + code);
        }
    }

    private static TimeUnit timeUnit(String unit) {
        switch (unit) {
            case "s": return TimeUnit.SECOND;
            case "ms": return TimeUnit.MILLISECOND;
            case "us": return TimeUnit.MICROSECOND;
            case "ns": return TimeUnit.NANOSECOND;
            default: throw new IllegalArgumentException("unknown time unit " + unit);
        }
    }

    @Override
    public void open() throws Exception {
        super.open();
        allocator = new RootAllocator(Long.MAX_VALUE);
        List<Field> fields = new ArrayList<>();
        for (int i = 0; i < names.length; i++) {
            fields.add(field(names[i], types[i], true));
        }
        if (kindField != null) {
            fields.add(new Field(kindField, FieldType.notNullable(new ArrowType.Int(8, true)), null));
        }
        root = VectorSchemaRoot.create(new Schema(fields), allocator);
        root.allocateNew();
        columns = new ArrayList<>();
        for (int i = 0; i < names.length; i++) {
            columns.add(column(names[i], types[i], root.getVector(i)));
        }
        kinds = kindField != null ? (TinyIntVector) root.getVector(names.length) : null;
        rows = 0;
        bytes = 0;
        if (flushMs > 0) {
            long now = getProcessingTimeService().getCurrentProcessingTime();
            getProcessingTimeService().registerTimer(now + flushMs, this::onTimer);
        }
    }

    private void onTimer(long time) throws Exception {
        emit();
        getProcessingTimeService().registerTimer(time + flushMs, this::onTimer);
    }

    @Override
    public void processElement(StreamRecord<Row> element) throws Exception {
        Row row = element.getValue();
        RowKind kind = row.getKind();
        if (kind != RowKind.INSERT) {
            if (kinds == null) {
                throw new IllegalArgumentException(
                        "lakelog sink of " + table + ": got a " + kind.shortString()
                                + " row, but the input was declared insert-only (changelog=False)");
            }
            if (kind == RowKind.UPDATE_BEFORE && dropUpdateBefore) {
                return;
            }
        }
        int at = rows;
        for (int i = 0; i < columns.size(); i++) {
            Object value = row.getField(inputIndex[i]);
            if (value == null) {
                if (!nullable[i]) {
                    throw new IllegalArgumentException(
                            "lakelog sink of " + table + ": column '" + names[i]
                                    + "' is NOT NULL but the input holds a null");
                }
                columns.get(i).setNull(at);
                bytes += 1;
            } else {
                try {
                    bytes += columns.get(i).set(at, value);
                } catch (RuntimeException e) {
                    throw new IllegalArgumentException(
                            "lakelog sink of " + table + ": column '" + names[i] + "' ("
                                    + types[i] + ") cannot take the value " + value + " ("
                                    + value.getClass().getSimpleName() + "): " + e.getMessage(),
                            e);
                }
            }
        }
        if (kinds != null) {
            kinds.setSafe(at, kind.toByteValue());
        }
        rows = at + 1;
        if (rows >= maxRows || bytes >= maxBytes) {
            emit();
        }
    }

    /**
     * Before a checkpoint barrier: the batch, then an empty record, the <em>flush marker</em>. The
     * Python stages pass it on to the writers of every (partition, bucket) that received rows since
     * the last one, and those write their rows now, so that everything before the barrier is in
     * files (and in committables) that this checkpoint publishes.
     */
    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        emit();
        output.collect(new StreamRecord<>(new byte[0]));
        super.prepareSnapshotPreBarrier(checkpointId);
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE) {
            // rows first: downstream finishes its work on the final watermark; the marker also
            // wakes the committer, which after a restart may have received nothing else
            emit();
            output.collect(new StreamRecord<>(new byte[0]));
        }
        super.processWatermark(mark);
    }

    @Override
    public void endInput() throws Exception {
        emit();
    }

    @Override
    public void finish() throws Exception {
        emit();
        super.finish();
    }

    @Override
    public void close() throws Exception {
        if (root != null) {
            root.close();
            root = null;
        }
        if (allocator != null) {
            allocator.close();
            allocator = null;
        }
        super.close();
    }

    /** Hands the gathered rows on as one Arrow IPC stream and starts a new batch. */
    private void emit() throws IOException {
        if (rows == 0) {
            return;
        }
        root.setRowCount(rows);
        ByteArrayOutputStream out = new ByteArrayOutputStream((int) Math.min(bytes + 4096, 1 << 30));
        try (ArrowStreamWriter writer = new ArrowStreamWriter(root, null, Channels.newChannel(out))) {
            writer.start();
            writer.writeBatch();
            writer.end();
        }
        output.collect(new StreamRecord<>(out.toByteArray()));
        root.clear();
        root.allocateNew();
        rows = 0;
        bytes = 0;
    }

    // ---- columns -------------------------------------------------------------------------------

    /** Writes one column's values; {@link #set} returns about how many bytes the value takes. */
    private interface Column {
        long set(int index, Object value);

        void setNull(int index);
    }

    /** Sets one non-null value of a fixed-width column. */
    private interface Setter {
        void set(int index, Object value);
    }

    private static Column fixed(FieldVector vector, Setter setter) {
        BaseFixedWidthVector fixedWidth = (BaseFixedWidthVector) vector;
        long width = Math.max(1, fixedWidth.getTypeWidth()); // a BitVector's width is 0 (bits): a byte
        return new Column() {
            public long set(int index, Object v) {
                setter.set(index, v);
                return width;
            }

            public void setNull(int index) {
                fixedWidth.setNull(index);
            }
        };
    }

    private Column column(String name, String code, FieldVector vector) {
        if (code.startsWith("list(") || code.startsWith("map(")) {
            return repeated(name, code, (ListVector) vector);
        }
        if (code.startsWith("row(")) {
            return struct(name, code, (StructVector) vector);
        }
        String[] p = code.split(":");
        switch (p[0]) {
            case "bool": {
                BitVector bits = (BitVector) vector;
                return fixed(vector, (at, v) -> bits.setSafe(at, ((Boolean) v) ? 1 : 0));
            }
            case "i8": {
                TinyIntVector ints = (TinyIntVector) vector;
                return fixed(vector, (at, v) -> ints.setSafe(at, (byte) integral(v, Byte.MIN_VALUE, Byte.MAX_VALUE)));
            }
            case "i16": {
                SmallIntVector ints = (SmallIntVector) vector;
                return fixed(vector, (at, v) -> ints.setSafe(at, (short) integral(v, Short.MIN_VALUE, Short.MAX_VALUE)));
            }
            case "i32": {
                IntVector ints = (IntVector) vector;
                return fixed(vector, (at, v) -> ints.setSafe(at, (int) integral(v, Integer.MIN_VALUE, Integer.MAX_VALUE)));
            }
            case "i64": {
                BigIntVector ints = (BigIntVector) vector;
                return fixed(vector, (at, v) -> ints.setSafe(at, integral(v, Long.MIN_VALUE, Long.MAX_VALUE)));
            }
            case "f32": {
                Float4Vector floats = (Float4Vector) vector;
                return fixed(vector, (at, v) -> floats.setSafe(at, ((Number) v).floatValue()));
            }
            case "f64": {
                Float8Vector floats = (Float8Vector) vector;
                return fixed(vector, (at, v) -> floats.setSafe(at, ((Number) v).doubleValue()));
            }
            case "date": {
                DateDayVector days = (DateDayVector) vector;
                return fixed(vector, (at, v) -> days.setSafe(at, epochDay(v)));
            }
            case "time": {
                TimeMilliVector times = (TimeMilliVector) vector;
                return fixed(vector, (at, v) -> times.setSafe(at, millisOfDay(v)));
            }
            case "dec": {
                DecimalVector decimals = (DecimalVector) vector;
                int precision = Integer.parseInt(p[1]);
                int scale = Integer.parseInt(p[2]);
                return fixed(vector, (at, v) -> decimals.setSafe(at, decimal(v, precision, scale)));
            }
            case "ts":
            case "tsz": {
                TimeStampVector stamps = (TimeStampVector) vector;
                long perSecond = unitsPerSecond(p[1]);
                boolean zoned = p[0].equals("tsz");
                return fixed(vector, (at, v) -> stamps.setSafe(at, timestamp(v, zoned, perSecond)));
            }
            case "str":
            case "bin": {
                boolean text = p[0].equals("str");
                BaseVariableWidthVector var = (BaseVariableWidthVector) vector;
                return new Column() {
                    public long set(int index, Object v) {
                        byte[] data = text ? v.toString().getBytes(StandardCharsets.UTF_8) : (byte[]) v;
                        var.setSafe(index, data, 0, data.length);
                        return data.length + 4;
                    }

                    public void setNull(int index) {
                        var.setNull(index);
                    }
                };
            }
            default:
                throw new IllegalArgumentException("column '" + name + "': type code " + code);
        }
    }

    /** The type codes of a nested code's children (see {@link #field}). */
    private static List<String> childCodes(String list) {
        List<String> out = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i <= list.length(); i++) {
            char c = i < list.length() ? list.charAt(i) : ',';
            if (c == '(') {
                depth++;
            } else if (c == ')') {
                depth--;
            } else if (c == ',' && depth == 0) {
                out.add(list.substring(start, i).split("~", 3)[2]);
                start = i + 1;
            }
        }
        return out;
    }

    /** Sets a child value, or null; returns about how many bytes it takes. */
    private static long setChild(Column child, int index, Object value) {
        if (value == null) {
            child.setNull(index);
            return 1;
        }
        return child.set(index, value);
    }

    /** ARRAY and MULTISET/MAP columns: Java arrays or collections, and maps (a MULTISET's counts). */
    private Column repeated(String name, String code, ListVector list) {
        boolean isMap = code.startsWith("map(");
        List<String> codes = childCodes(inner(code, isMap ? "map(" : "list("));
        final Column element;
        final Column key;
        final Column value;
        final StructVector entries;
        if (isMap) {
            entries = (StructVector) list.getDataVector();
            key = column(name + ".key", codes.get(0), (FieldVector) entries.getChildByOrdinal(0));
            value = column(name + ".value", codes.get(1), (FieldVector) entries.getChildByOrdinal(1));
            element = null;
        } else {
            entries = null;
            key = null;
            value = null;
            element = column(name + ".element", codes.get(0), list.getDataVector());
        }
        return new Column() {
            public long set(int index, Object v) {
                int at = list.startNewValue(index);
                long bytes = 4;
                int n = 0;
                if (isMap) {
                    if (!(v instanceof Map)) {
                        throw new IllegalArgumentException("not a map");
                    }
                    for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                        entries.setIndexDefined(at + n);
                        if (e.getKey() == null) {
                            throw new IllegalArgumentException("a map key is null");
                        }
                        bytes += key.set(at + n, e.getKey());
                        bytes += setChild(value, at + n, e.getValue());
                        n++;
                    }
                } else if (v instanceof Collection) {
                    for (Object x : (Collection<?>) v) {
                        bytes += setChild(element, at + n, x);
                        n++;
                    }
                } else if (v.getClass().isArray()) {
                    int len = Array.getLength(v);
                    for (; n < len; n++) {
                        bytes += setChild(element, at + n, Array.get(v, n));
                    }
                } else {
                    throw new IllegalArgumentException("not an array");
                }
                list.endValue(index, n);
                return bytes;
            }

            public void setNull(int index) {
                list.setNull(index);
            }
        };
    }

    /** ROW columns: Flink Rows (fields by position). */
    private Column struct(String name, String code, StructVector struct) {
        List<String> codes = childCodes(inner(code, "row("));
        List<Column> fields = new ArrayList<>();
        for (int i = 0; i < codes.size(); i++) {
            fields.add(column(name + "." + i, codes.get(i), (FieldVector) struct.getChildByOrdinal(i)));
        }
        return new Column() {
            public long set(int index, Object v) {
                if (!(v instanceof Row)) {
                    throw new IllegalArgumentException("not a row");
                }
                Row row = (Row) v;
                if (row.getArity() != fields.size()) {
                    throw new IllegalArgumentException("has " + row.getArity() + " fields, not " + fields.size());
                }
                struct.setIndexDefined(index);
                long bytes = 1;
                for (int i = 0; i < fields.size(); i++) {
                    bytes += setChild(fields.get(i), index, row.getField(i));
                }
                return bytes;
            }

            public void setNull(int index) {
                struct.setNull(index);
            }
        };
    }

    // ---- value conversions (the same rules as Flink's own conversions to its internal types) ------

    static long integral(Object v, long min, long max) {
        long x;
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            x = ((Number) v).longValue();
        } else if (v instanceof BigDecimal) {
            x = ((BigDecimal) v).longValueExact();
        } else {
            throw new IllegalArgumentException("not an integer");
        }
        if (x < min || x > max) {
            throw new IllegalArgumentException("out of range [" + min + ", " + max + "]");
        }
        return x;
    }

    static BigDecimal decimal(Object v, int precision, int scale) {
        BigDecimal d;
        if (v instanceof BigDecimal) {
            d = (BigDecimal) v;
        } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
            d = BigDecimal.valueOf(((Number) v).longValue());
        } else {
            throw new IllegalArgumentException("not a decimal");
        }
        BigDecimal scaled;
        try {
            scaled = d.setScale(scale, RoundingMode.UNNECESSARY);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("has more than " + scale + " decimal places");
        }
        if (scaled.precision() > precision) {
            throw new IllegalArgumentException("does not fit DECIMAL(" + precision + ", " + scale + ")");
        }
        return scaled;
    }

    /** java.sql types are wall-clock values in the JVM's time zone (as Flink converts them). */
    private static long localMillis(java.util.Date d) {
        long ms = d.getTime();
        return ms + TimeZone.getDefault().getOffset(ms);
    }

    static int epochDay(Object v) {
        if (v instanceof LocalDate) {
            return Math.toIntExact(((LocalDate) v).toEpochDay());
        }
        if (v instanceof java.sql.Date) {
            return Math.toIntExact(Math.floorDiv(localMillis((java.sql.Date) v), MILLIS_PER_DAY));
        }
        if (v instanceof Integer) {
            return (Integer) v;
        }
        throw new IllegalArgumentException("not a date");
    }

    static int millisOfDay(Object v) {
        if (v instanceof LocalTime) {
            return (int) (((LocalTime) v).toNanoOfDay() / 1_000_000L);
        }
        if (v instanceof java.sql.Time) {
            return (int) Math.floorMod(localMillis((java.sql.Time) v), MILLIS_PER_DAY);
        }
        if (v instanceof Integer) {
            return (Integer) v;
        }
        throw new IllegalArgumentException("not a time of day");
    }

    private static long unitsPerSecond(String unit) {
        switch (unit) {
            case "s": return 1L;
            case "ms": return 1_000L;
            case "us": return 1_000_000L;
            case "ns": return 1_000_000_000L;
            default: throw new IllegalArgumentException("unknown time unit " + unit);
        }
    }

    /** Epoch value in units of 1/perSecond s; fails when that would drop sub-unit digits. */
    static long timestamp(Object v, boolean zoned, long perSecond) {
        long seconds;
        int nanos;
        if (v instanceof LocalDateTime) {
            LocalDateTime t = (LocalDateTime) v;
            seconds = t.toEpochSecond(ZoneOffset.UTC);
            nanos = t.getNano();
        } else if (v instanceof Instant) {
            Instant t = (Instant) v;
            seconds = t.getEpochSecond();
            nanos = t.getNano();
        } else if (v instanceof java.sql.Timestamp) {
            java.sql.Timestamp ts = (java.sql.Timestamp) v;
            if (zoned) {
                Instant t = ts.toInstant();
                seconds = t.getEpochSecond();
                nanos = t.getNano();
            } else {
                LocalDateTime t = ts.toLocalDateTime();
                seconds = t.toEpochSecond(ZoneOffset.UTC);
                nanos = t.getNano();
            }
        } else {
            throw new IllegalArgumentException("not a timestamp");
        }
        long nanosPerUnit = 1_000_000_000L / perSecond;
        if (nanos % nanosPerUnit != 0) {
            throw new IllegalArgumentException("has digits below the column's precision");
        }
        return Math.addExact(Math.multiplyExact(seconds, perSecond), nanos / nanosPerUnit);
    }
}
