import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.locks.LockSupport;

import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The latency cells of the streaming benchmark on Reactor: ReactorBench's
 * plain shape, range -> groupBy(hash mod P) -> flatMap(g -> g.publishOn(parallel(threads))
 * .concatMap(handler), P), with a paced source. Flux.generate emits exchange i
 * when the source is asked for it and i / rate seconds have passed since the
 * start (sleeping while far from that time, spinning when close: Thread.yield would
 * give the core to other processes), so a
 * pipeline that falls behind slows the source down, as the Go producer is
 * slowed by backpressure; each exchange carries its send time and the handler
 * records its wait from send to handler start.
 *
 * First `warmups` unpaced passes over the whole stream let the JIT compile the
 * pipeline; then one paced pass of n exchanges is measured.
 *
 * args: keys groups handler(noop|spin1us|sleep50us) n threads warmups rate(exchanges/s)
 * prints: impl=reactor keys=.. groups=.. n=.. rate=.. achieved=.. p50_ns=.. p90_ns=.. p99_ns=.. p999_ns=.. peak_rss_kb=..
 */
public final class ReactorLatency {
	static int groupKey(String id, int n) { // aggregate.GroupKey: Java hashCode mod n, made non-negative
		int k = id.hashCode() % n;
		return k < 0 ? k + n : k;
	}

	static void spin(long nanos) {
		long start = System.nanoTime();
		while (System.nanoTime() - start < nanos) { }
	}

	/** One exchange: its id, its number in the stream and its send time. */
	record Ex(String id, int num, long sent) { }

	public static void main(String[] a) throws Exception {
		int keys = Integer.parseInt(a[0]), groups = Integer.parseInt(a[1]);
		String handler = a[2];
		int n = Integer.parseInt(a[3]), threads = Integer.parseInt(a[4]);
		int warmups = Integer.parseInt(a[5]);
		double rate = Double.parseDouble(a[6]);

		String[] ids = new String[keys];
		for (int i = 0; i < keys; i++) ids[i] = "account-" + i;
		SplittableRandom r = new SplittableRandom(keys);
		int[] seq = new int[n];
		for (int i = 0; i < n; i++) seq[i] = r.nextInt(keys);

		Runnable h;
		switch (handler) {
			case "noop": h = () -> { }; break;
			case "spin1us": h = () -> spin(1_000); break;
			case "sleep50us": h = () -> LockSupport.parkNanos(50_000); break;
			default: throw new IllegalArgumentException(handler);
		}
		final Runnable handle = h;
		Scheduler sched = Schedulers.newParallel("p", threads);
		long[] waits = new long[n];

		for (int it = 0; it < warmups; it++) {
			Flux.range(0, n).map(i -> ids[seq[i]])
					.groupBy(k -> groupKey(k, groups))
					.flatMap(g -> g.publishOn(sched).concatMap(x -> Mono.fromRunnable(handle)), groups)
					.then().block();
		}

		double interval = 1e9 / rate;
		long[] lastSent = new long[1];
		long t0 = System.nanoTime();
		Flux<Ex> src = Flux.generate(() -> 0, (i, sink) -> {
			if (i >= n) {
				sink.complete();
				return i;
			}
			long due = t0 + (long) (i * interval);
			long now;
			for (;;) {
				now = System.nanoTime();
				long d = due - now;
				if (d <= 0) break;
				if (d > 2_000_000) LockSupport.parkNanos(d - 1_000_000);
				else Thread.onSpinWait();
			}
			lastSent[0] = now;
			sink.next(new Ex(ids[seq[i]], i, now));
			return i + 1;
		});
		src.groupBy(x -> groupKey(x.id(), groups))
				.flatMap(g -> g.publishOn(sched).concatMap(x -> Mono.fromRunnable(() -> {
					waits[x.num()] = System.nanoTime() - x.sent();
					handle.run();
				})), groups)
				.then().block();
		double achieved = n / ((lastSent[0] - t0) / 1e9);
		sched.dispose();

		long[] sorted = waits.clone();
		Arrays.sort(sorted);
		long hwm = 0;
		for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
			if (line.startsWith("VmHWM:")) hwm = Long.parseLong(line.replaceAll("[^0-9]", ""));
		}
		System.out.printf("impl=reactor keys=%d groups=%d handler=%s n=%d threads=%d rate=%.0f achieved=%.0f p50_ns=%d p90_ns=%d p99_ns=%d p999_ns=%d peak_rss_kb=%d%n",
				keys, groups, handler, n, threads, rate, achieved,
				q(sorted, 0.50), q(sorted, 0.90), q(sorted, 0.99), q(sorted, 0.999), hwm);
	}

	/** The q-quantile of sorted, as the Go side computes it. */
	static long q(long[] sorted, double p) {
		return sorted[Math.min(sorted.length - 1, (int) (p * sorted.length))];
	}
}
