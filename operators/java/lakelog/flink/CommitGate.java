package lakelog.flink;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * lakelog's checkpoint-gated commit channel kept in Flink state (see "Commit channel" in
 * {@code operators/README.md}): committable lines in, the same lines out once the checkpoint that
 * covers them has completed.
 *
 * <p>A line that arrives between barriers {@code c-1} and {@code c} waits under checkpoint
 * {@code c}; {@link #notifyCheckpointComplete} lets out every line waiting under a completed
 * checkpoint. The waiting lines are this operator's list state, so a restore from checkpoint
 * {@code c} finds exactly the lines that {@code c} covers and had not let out yet, and lets them
 * out at once (they are released: {@code c} completed). Lines may so come out twice (a restore, or
 * a notification that never came before the next snapshot); the committer drops committables it has
 * already committed.
 *
 * <p>The {@code wake} line carries no committable and passes at once; after a restore the gate sends
 * one itself, so that the Python committer (opened only by an element) starts. At the final watermark
 * everything still waiting goes out before the watermark: the committer commits the tail at end of
 * input.
 */
public class CommitGate extends AbstractStreamOperator<String>
        implements OneInputStreamOperator<String, String>, BoundedOneInput {
    private static final long serialVersionUID = 1L;
    private static final char SEP = ' ';

    private final String wake;
    private transient ListState<String> state;
    private transient TreeMap<Long, List<String>> waiting;
    private transient List<String> current;
    private transient List<String> restored;
    private transient boolean wasRestored;

    public CommitGate(String wake) {
        this.wake = wake;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        state = context.getOperatorStateStore()
                .getListState(new ListStateDescriptor<>("lakelog-commit-gate", Types.STRING));
        waiting = new TreeMap<>();
        current = new ArrayList<>();
        restored = new ArrayList<>();
        wasRestored = context.isRestored();
        if (wasRestored) {
            for (String entry : state.get()) {
                int at = entry.indexOf(SEP);
                restored.add(entry.substring(at + 1));
            }
        }
    }

    @Override
    public void open() throws Exception {
        super.open();
        if (wasRestored) {
            for (String line : restored) {
                output.collect(new StreamRecord<>(line));
            }
            output.collect(new StreamRecord<>(wake));
        }
        restored = new ArrayList<>();
    }

    @Override
    public void processElement(StreamRecord<String> element) throws Exception {
        String line = element.getValue();
        if (wake.equals(line)) {
            output.collect(new StreamRecord<>(line));
        } else {
            current.add(line);
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        if (!current.isEmpty()) {
            waiting.computeIfAbsent(context.getCheckpointId(), k -> new ArrayList<>()).addAll(current);
            current = new ArrayList<>();
        }
        List<String> entries = new ArrayList<>();
        for (Map.Entry<Long, List<String>> e : waiting.entrySet()) {
            for (String line : e.getValue()) {
                entries.add(e.getKey() + String.valueOf(SEP) + line);
            }
        }
        state.update(entries);
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        super.notifyCheckpointComplete(checkpointId);
        Map<Long, List<String>> released = waiting.headMap(checkpointId, true);
        for (List<String> lines : released.values()) {
            for (String line : lines) {
                output.collect(new StreamRecord<>(line));
            }
        }
        released.clear();
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        if (mark.getTimestamp() == Long.MAX_VALUE) {
            releaseAll();
        }
        super.processWatermark(mark);
    }

    @Override
    public void endInput() throws Exception {
        releaseAll();
    }

    private void releaseAll() {
        for (List<String> lines : waiting.values()) {
            for (String line : lines) {
                output.collect(new StreamRecord<>(line));
            }
        }
        waiting.clear();
        for (String line : current) {
            output.collect(new StreamRecord<>(line));
        }
        current = new ArrayList<>();
    }
}
