package lakelog.flink;

import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * The element of lakelog's clock (see {@code lakelog.operators.ticker}): every tick is 0.
 *
 * <p>Flink's {@code DataGeneratorSource} calls it once per tick and spaces the ticks evenly with
 * its rate limiter. SQL's {@code datagen} connector cannot serve as a clock under a second: it emits
 * a second's rows in one burst and then sleeps until the next second.
 */
public final class Ticks implements GeneratorFunction<Long, Integer> {
    private static final long serialVersionUID = 1L;
    private static final Integer TICK = 0;

    @Override
    public Integer map(Long index) {
        return TICK;
    }
}
