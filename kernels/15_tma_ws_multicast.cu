// v15: v13's persistent, warp-specialised kernel with the B tile shared by a cluster of CM blocks through TMA
// multicast (and, at CN > 1, the A tile by CN blocks side by side), and optional epilogues that leave C to the copy
// engine (STORE 1 and 2). Its tile is CWG consumer warpgroups of 64 rows by BN = 256, 192, 128, 96 or 64 columns; the
// large shapes take 128 x 256 (CWG 2, BN 256, the defaults), the narrow tiles are v13's for small shapes with the same
// additions, and 192 x 192 (CWG 3, BN 192) is for shapes that it cuts into one tile for every SM, where any smaller
// tile leaves a second, partial wave (4104x1032x200: 22 x 6 = 132 tiles; 128 x 128 makes 297, 2.25 waves).
// 128 x 192 (CWG 2, BN 192) is for mid-size shapes whose 128 x 256 tiles leave SMs idle (2048x1536x1536: 128 tiles
// against 96), where it ran at 0.85 (bf16 out) and 0.81 (TF32) of the wide tile's rate over its waves
// (checks/mid-192.json.gz beside mid-tables.json.gz).
//
// Why: at 4096^3 a block of v13 reads a 48 KB stage (16 KB of A, 32 KB of B) from L2 for every 1,024 cycles
// of wgmma (64 K of a 128 x 256 tile at 4,096 bf16 FLOP a cycle), 132 SMs together about 6.3 KB a cycle:
// about 10 TB/s at 1.6 GHz, at the L2's own limit, and every byte moved costs power on a GPU whose clock
// is set by its power. Blocks of tiles one above the other read the same B panel. In a cluster of CM such
// blocks (tile rows CM u .. CM u + CM - 1 of one tile column), rank r loads its own A tile and 1 / CM of the
// shared B tile, which the copy engine writes into every block of the cluster at once: CM = 2 asks L2 for
// 32 KB a stage instead of 48 (4.2 KB a cycle over the GPU).
//
// Clusters of CM tile rows by CN tile columns (CN 2 or 4, CM CN at most 8; rank = row rank + CM column rank): the
// ranks of a tile column share B as above, and the ranks of a tile row share A, each loading 64 CWG / CN of the A
// tile's rows into every rank of its row, so that a block asks L2 for 1 / CN of its A tile and 1 / CM of its B tile.
// A unit is then CM x CN tiles, and the units' grid ceil(tile columns / CN) x ceil(tile rows / CM); a rank whose tile
// lies past N, like one past M, loads zeros for its peers and stores nothing. At CN 1 the column rank is the constant
// 0, and the kernel compiles as without it.
//
// The ring across a cluster: a stage of rank r's ring is written by every rank's producer (its B share), so
// - each block's `full` barrier expects the whole stage (A plus all of B): the peers' copies count their bytes
//   against it, completing at the same offset in every destination block;
// - a stage is free only when every rank's consumers are done with it: each consumer warp releases a stage on
//   the `empty` barrier of every rank (4 CWG CM CN arrivals a phase; at CN > 1 that includes ranks that write none
//   of the stage, which only delays a refill until they too are done). A peer's copies of fill n + 1 can therefore
//   not reach a block before its own consumers have finished fill n of that slot;
// - the cluster meets once after the barriers are made (no copy may reach a barrier not yet made), and a
//   block's producer, before it exits, waits for the release of its last STAGES fills, so that no peer still
//   arrives on a barrier of an exited block.
// Every block of a cluster walks the same units (cluster c: units c, c + clusters, ..., GROUP-swizzled over a
// grid of ceil(N / BN) x ceil(tile rows / CM) units). Where the tile rows are odd, the last unit's second tile
// lies past M: its loads read the maps' zeros and its rows are not stored.
//
// Epilogue (after alpha, as v13):
// - STORE 0: v12p's store_tile from registers (fp32 as float2, bf16 in whole 32-byte sectors).
// - STORE 1: each consumer warpgroup writes its 64 x BN slab in chunks of 64 rows x 128 bytes (64 bf16 or 32
//   fp32 columns; 64 bytes, 32 bf16 columns, where a slab's row is an odd number of 64-byte halves: bf16 at BN 96)
//   into one of two 8 KB staging buffers, in the swizzle of the chunk's row width (conflict-free: the rows a warp
//   writes together fall in different 16-byte columns), and one thread hands each chunk to the copy engine
//   (a TMA store through the map of C, box [64, 1024 / OUT], or [64, 32] with the 64-byte swizzle at BN 96 bf16),
//   which clips rows past M and columns past N. Before a buffer is rewritten, that thread waits until the store two
//   chunks back has read it; the chunks alternate between the two buffers across the block's tiles too, so that with
//   an odd number of chunks a tile (1 at 64 bf16 columns, 3 at 96 and 192) a tile's first chunk does not reuse the
//   buffer of the chunk just handed over. The consumers go on to the next tile's K loop while the last chunks are
//   written to memory; at the end the block waits only for the copy engine to have read its last chunks, not for
//   their writes to land (they complete with the grid).
// - STORE 2: as STORE 1, in the same buffers, but each warp stages its own 16 rows of a chunk (bf16 with stmatrix,
//   four 8 x 8 matrices an instruction, whose fragment layout is the accumulators') and hands them to the copy engine
//   itself (box [16, chunk columns]; warp w's rows start 16 w row widths into the buffer, a multiple of the swizzle's
//   repeat, so the swizzle is the same). Before it rewrites a buffer a warp waits only for its own store two chunks
//   back: no warp waits for another, where STORE 1's warpgroup meets at a named barrier twice a chunk.
//
// Element types and B's orientation are v13's (ELEM 16 bf16 with B row-major, BT 0, or column-major, BT 1; ELEM
// 8 e4m3 and ELEM 32 tf32 with BT 1). B's share of rank r: BT 0, boxes b r / CM .. b (r + 1) / CM - 1 of the
// tile's b boxes (at BN 64 and CM 2, rank 1 loads the one box for both); BT 1, rows BN r / CM .. of the tile's BN
// K-major rows, one box of BN / CM rows. With B row-major a box is one swizzle panel: 64 columns in 128-byte rows,
// or at BN 96 (no multiple of 64) 32 columns in 64-byte rows with the 64-byte swizzle, three a stage, so that the
// ring holds exactly the columns multiplied and the wgmma's descriptor steps from panel to panel.
// Shapes: as v13 (K * ELEM / 8 a multiple of 16; N % 8 == 0).
//
// Launch (CWG 2, BN 256 and CN 1 unless given: the large shapes' tile): block 128 * (CWG + 1), cluster [CM CN, 1, 1],
// grid CM CN * min(sm_count // (CM CN), max_active_clusters, ceil(ceil(N / BN) / CN) * ceil(ceil(M / (64 CWG)) / CM)),
// dynamic shared memory STAGES * (64 CWG + BN) * 128 + min(STORE, 1) * CWG * 16384 + 16 * STAGES + 1024; tensor maps
// (128-byte swizzle unless given): A box [64 CWG / CN, BK]; B box [BK, 64], at BN 96 [BK, 32] with the 64-byte
// swizzle (BT 0), or [BN / CM, BK] (BT 1); C box [64, 1024 / OUT], at BN 96 with bf16 out [64, 32] with the 64-byte
// swizzle, 16 rows instead of 64 at STORE 2. Needs sm_90a.
// Clusters of four blocks: on the H200 (132 SMs) 30 such clusters of these blocks fit at once, not 33; a grid of
// sm_count // 4 clusters runs its last ones only when others finish (the run notes it, the cluster waves): the 128 x
// 256 tile at CM 2 by CN 2 so measured 61.1% of the vendor row at 4096^3, about what a second wave of three clusters
// predicts (inferred; checks/epilogue-bf16-out-m2n2-4096x4096x4096.json.gz). The grid above reads
// max_active_clusters, the driver's count, and so asks for no more; the suite's cluster-of-four forms have at most
// 24 units.
// The producer warpgroup keeps 40 registers a thread and gives the rest to the consumers: 232 at CWG 2, 152 at
// CWG 3, which hold BN / 2 accumulators of at most 96 (BN 192; NVRTC 13.5: no spills at either). A 192 x 192 stage
// is 48 KB, so with STORE 1's 48 KB of staging buffers the ring has 3 stages, without them 4.
// One thread of the producer warpgroup fetches the tensor maps' descriptors while thread 0 makes the ring's barriers.
//
// Predicted (from the design, before it ran): CM 2 takes a third of the L2 traffic away, as cuBLASLt's own
// kernel for these shapes does with its cluster of two: from v13's 93-95% of cuBLASLt BF16 at 4096^3 to about
// 100%, and a few points more at 8192^3. STORE 1 takes the epilogue's global stores (64 8-byte stores a thread
// and tile) off the consumers' path: 1-2% more where a block has few K-tiles a tile.
//
// Measured on the H200, 2026-12-03: % of the run's own vendor row (the best of its heuristic's first 8), each run's
// cases one after another; files and commands in docs/performance.md ("Focused checks"). The SM clock is set by
// power at these shapes, so the same form moved by up to 23 points against its vendor row between runs of the same day
// (below; docs/timing.md).
//   BF16, bf16 out, 4096^3 (8 forms and v13, one run): v13 91.4%; CM 1 92.6-109.0%, CM 2 97.0-107.7%; best GROUP 16,
//     CM 1, STORE 1 (109.0%), then GROUP 16, CM 2, STORE 0 (107.7%).
//   BF16, bf16 out, 8192^3 (6 forms before the step's timeout): CM 2 98.8% (STORE 0) and 100.3% (STORE 1); CM 1
//     84.8-95.4%.
//   TF32 (B column-major), 4096^3 and 4096x14336x4096 (a second run of its 8 forms): CM 2 with GROUP 8 and STORE 0
//     at 103.1% and 107.1%, v13 at 93.5% and 94.2%. FP8 e4m3 at 4096^3: v15 101.9-114.6%, v13 109.5%.
//   The suite's large shapes with its tables as they are now (specs/suite.yaml), two runs of `scripts/gpu_check.sh
//   suite` on 2026-12-04, each form timed in 3 rounds alternating with its vendor row (the suite's measure.rounds), the
//   vendor row's algorithm picked by a screen and a final (docs/timing.md; checks/suite-*-large.json.gz and
//   suite-*-large-2.json.gz), and against torch.mm under do_bench (checks/torch-suite-all-*.json.gz, % of torch):
//     shape             bf16 out: run 1  run 2  torch      TF32: run 1  run 2  torch
//     8192x1024x8192              98.9%  105.0%  97.5%           101.1%  100.8%  100.9%
//     4096x14336x4096             97.7%  101.0%  99.7%           101.4%  100.1%  104.0%
//     4096x4096x14336             99.5%   96.0%  98.1%           111.8%  104.5%  101.1%
//     4096^3                     101.3%   93.8%  96.9%           103.8%   98.6%  100.8%
//     8192^3                      99.5%  109.2% 103.7%           101.1%   99.8%  103.3%
//   The runs differ by up to 9.7 points at one shape: at these power-bound shapes which side meets the cooler clock
//   over its rounds moves the ratio, and one run does not settle a figure.
//   With the vendor row picked by a single short pass over its candidates (the same table and command,
//   checks/suite-bf16-large-single-pass.json.gz), 8192^3 in bf16 out measured 112.8%: that pass kept a 192 x 192 tile
//   that sustained load slows.
//   Timed once each, one after the other, the figures spread widely: the clock is set by power, and both sides move
//   between starts of the machine. At 4096^3 the suite's bf16 form took 0.1841 and 0.1800 ms in two runs of
//   specs/sweep-v15.yaml and the vendor row 0.2007 and 0.1748 ms: 109.0% and 97.1%.
//   Against torch.mm under triton's do_bench, interleaved on the same tensors with the clocks side by side (the suite's
//   bf16-out entries), the spread is narrower: 96.1% and 95.7% at 4096^3 in two runs (ours at 1710 MHz both times,
//   torch at 1770 and 1785), 95.9% at 4096x4096x14336 and 101.9% at 8192^3.
// Against the prediction: the gain over v13 at 4096^3 (10-18 points) comes as much from the copy engine's stores with
// a wider block order (CM 1) as from the multicast; the multicast is what wins at 8192^3 in bf16, where A and B no
// longer fit in L2 together, and in TF32 at both shapes of its second run (why TF32 gains from it at 4096^3 where bf16
// does not is not established).
// Nsight Compute (one launch a case at the GPU's own clocks, `scripts/gpu_check.sh profile-suite`; its file on the
// results page): at 4096^3 the tensor pipe is busy 93.9% of the kernel's active cycles, at 8192^3 97.2%; the top stall
// is the barrier (4.7 and 3.8 cycles per issued instruction), then mio_throttle and long_scoreboard at 1.2-1.6. The
// only bar.sync in the tile loop is the epilogue's named barrier, where a warpgroup waits while its leader waits for
// the copy engine to have read the staging buffer it is about to reuse: so (inferred, not measured apart) the
// epilogue's two buffers a warpgroup are what the consumers wait on. The tensor pipe has little idle time, so what
// remains against the vendor row is mostly the clock a run gets. Timed one after the other, both sides move between
// runs: at 8192^3 the suite's form (GROUP 8, CM 2, STORE 1) measured 1.431 and 1.573 ms (sweep, profile) and the vendor
// row 1.435 and 1.388 ms; in the suite's interleaved rounds, 1.583 against 1.578 ms (99.7%). In the profile run v15's
// one launch under ncu took 1.374 ms against its timed median of 1.573 ms, a gap not explained here.
// The ceiling beside the vendor's own kernels (scripts/ncu_vs_vendor.py, checks/ncu-vs-vendor-large.log.gz: one
// launch each, caches flushed, both at 1.55-1.58 GHz): at 4096^3 the busiest SM of either side multiplies 4 of the 512
// tiles, 262,144 cycles at the tensor cores' peak (2,048 bf16 multiply-adds a cycle an SM); ours took 282,889 active
// cycles, the vendor's 256 x 128 tile 276,322. At 8192^3 ours took 2,153,900 for 16 tiles (2,097,152 at peak), the
// vendor's 320 x 128 tile 2,206,022. So at equal clocks these tiles can be at most 5.4% and 5.2% faster than the
// vendor's kernels, with their tensor cores never idle: 105% of the vendor row at these shapes needs a clock the vendor
// does not get, or less work on the busiest SM than a whole tile's share (the last wave's tiles split between SMs).
// Ours moved 38% and 17% more bytes through L2.
//
// Narrow tiles and 192-column ones (`scripts/gpu_check.sh v15-small`: the narrow forms (CWG 1 or 2 by BN 64 or 128,
// 6 stages, STORE 1, CM 1 or 2) on every shape, the 192-column ones (CWG 2 or 3, 3 stages, STORE 1, CM 1 or 2) at
// 4104x1032x200, then the suite's own dispatch on the same shapes; every row at 1980 MHz): the best form of each.
//   shape             bf16 out: narrow  192 x 192  suite      tf32: narrow  192 x 192  suite
//   1024x512x1024           87.1%          -       88.8%           100.7%         -      107.8%
//   1001x520x776            84.6%          -       84.9%            94.7%         -       97.5%
//   127x4104x1032           85.4%          -       84.7%            92.3%         -       95.3%
//   4104x1032x200           83.0%        88.8%     83.9%           107.2%      121.5%     107.3%
//   128x4096x4096           75.2%          -       94.6%            74.7%         -      100.2%
//   128x8192x8192           89.1%          -       94.1%            91.0%         -       98.5%
//   128x14336x4096     (1 of 8 forms)      -       96.2%            96.6%         -       98.5%
// ("suite": the table the step ran, v15's narrow tile at 1001x520x776, 127x4104x1032 and 4104x1032x200, v13
// elsewhere.) At 4104x1032x200 the 192 x 192 tile leads every narrow one by 5.8 points
// in bf16 out and 14.3 in TF32: one tile for each SM, where 128 x 128 tiles made 153 units of two for 66 clusters.
// Its 128 x 192 form (CWG 2: 33 x 6 = 198 tiles) is at 80-81% and 106%. With C from registers (STORE 0), which
// leaves room for a fourth stage, it measured 79.3-81.1% and 112.1-114.0% (checks/v15-192-regs-*.json.gz): the
// copy engine's epilogue matters more here than a deeper ring. The suite's tables take it in both types, with each
// warp storing its own rows (STORE 2): with the consumers' K loop of v13's header, STORE 2 measured 93.0%
// against STORE 1's 91.6% in bf16 out (clusters of two) and 127.3% against 124.4% in TF32, in rounds beside each
// other (checks/epilogue-*-192-4104x1032x200.json.gz). Under
// Nsight Compute (profile-suite, whose table gave it the 128 x 128 tile) the bf16 4104x1032x200 launch took
// 12.4 us (14.4 us timed by events) with the tensor pipe busy 31% of it and long_scoreboard the top stall: its time
// is its fill, its waves of tiles and its epilogue, not its multiplies. At M = 128, where v13's entries split K
// across a cluster, v15 has no split and loses.
//
// The small shapes against the vendor's own kernels (BF16, bf16 out; checks/kernel-durations-bf16.json.gz:
// scripts/kernel_durations.py, the suite's cases timed in 3 rounds under torch.profiler): the event pair's front end
// is 3.3-3.6 us on both sides, so the gap is in the kernels. Kernel-only, ours against the vendor's: 1024x512x1024
// 6.02 / 5.09 us (84.6%), 1001x520x776 7.07 / 5.50 (77.8%), 127x4104x1032 8.74 / 6.88 (78.7%), 4104x1032x200
// 9.92 / 8.70 (87.7%). The vendor runs 64 x 96 tiles (in C's rows by columns) with 8 stages in clusters of 4 x 2 or
// 2 x 4 at the two awkward shapes and 64 x 64 with 13 stages at the seed's. Each of those three traits tried here
// (the best form of each, one run each, forms one after the other; files on the results page), beside the suite's own
// form in its rounds before the change (checks/suite-bf16-before-rings.json.gz):
//   shape            96 columns   clusters CM x CN, CN > 1   deep rings (8 to 13 stages)   the suite's form
//   1024x512x1024      75.3%          83.2%                     91.5% (v13: 91.3%)           89.2%
//   1001x520x776       80.2%          83.5%                     85.5%                        85.5%
//   127x4104x1032      79.2%          86.1%                     87.3%                        83.9%
//   4104x1032x200      79.0%          89.2% (192 x 192, CN 2)   74.9%                        88.6%
// Neither that 96-column form (two 64-column B boxes, 96 of their 128 columns multiplied, C from registers) nor sharing
// A as well as B closed the gap; deeper rings gained 1-3 points, and the suite's tables took them.
// 64 x 96 tiles as they are now: B in three 32-column boxes with the 64-byte swizzle, exactly the columns multiplied,
// and C through the copy engine in 32-column chunks. Predicted: the vendor's tile, ring and copy-engine epilogue, so
// its work per SM on the critical path, closing most of the gap (to about 95%). Measured, in 3 rounds each
// (checks/v15-96-clusters.json.gz): 87.7% at 1001x520x776 in clusters of 4 tile rows, 89.4% at 127x4104x1032 in
// clusters of 2 x 2, both with 8 stages (10 lost 1-5 points in a first run, checks/v15-96-copy-engine.json.gz); the
// vendor's own cluster shapes for these tiles (4 x 2 and 2 x 4 tile rows by columns) measured 85.3% and 87.3%.
// 256-byte L2 promotion on A and B adds about a point (checks/l2-promotion-*.json.gz: 88.4% and 90.1%). The suite's
// tables take these forms: 89.3% and 89.6% in its rounds (87.3% and 86.6% on the 64 x 128 tile).
// Nsight Compute beside the vendor's kernels (scripts/ncu_vs_vendor.py, checks/ncu-vs-vendor.log.gz: one launch each,
// caches flushed): the busiest SM's tensor-pipe cycles are now the vendor's (9,984 and 13,056 on both sides), but its
// active cycles are 15% and 12% more (10,211 against 8,867; 12,271 against 10,984), the kernels' L2 traffic 24% and
// 36% more (20.6 against 16.6 MB, 31.9 against 23.6 MB), and in both kernels the top stall is the consumers' wait for
// a stage to land (long scoreboard at the full barrier's try-wait). So the multiplies are even and what remains is
// the data's arrival; which of our traits costs the extra L2 traffic is not established (the vendor's clusters of 8
// blocks did not help here). Single launches of these shapes vary: the vendor's kernel at 127x4104x1032 took 12,839
// active cycles on its busiest SM in a first pass (checks/ncu-vs-vendor-64x128.log.gz, where ours, still on 64 x 128
// tiles, had 4/3 of its tensor-pipe cycles). At 4104x1032x200 the 192 x 192 tile took 10.40 us against the vendor's
// 10.08.
// Each warp's own stores (STORE 2). Predicted: under Nsight Compute at 1001x520x776 the epilogue held 20% of the
// warps' stall samples against the vendor's 8% (checks/ncu-vs-vendor-pages.tar.gz: there each warp stages its rows
// with stmatrix and stores them itself, with no barrier between warps), so taking STORE 1's two named barriers a chunk
// away should give back part of the 12-15% more active cycles: a few points on the small shapes. Measured, each pair
// in 3 rounds (specs/sweep-v15-epilogue.yaml; checks/epilogue-*.json.gz): 0.8 points more at 1001x520x776 (89.4%),
// 127x4104x1032 (90.2%) and 8192^3 (101.1%), even at 4104x1032x200 (88.5%), 2.8 fewer at 4096^3 (95.0%: a warpgroup's
// 64 x 64 chunk leaves as four 2 KB stores instead of one of 8 KB; not profiled). So the epilogue is a small part of
// what the small shapes lack; the suite's table takes STORE 2 where it gained.
// The consumers' K loop with fewer instructions a K-tile, a tile's short last K-tile cut to the steps that hold K, and
// the cluster's first meeting without a GPU-wide memory barrier: v13's header. With them the suite's forms measured
// 92.1-92.7% at 1001x520x776, 93.2-94.1% at 127x4104x1032 and 91.2-91.8% at 4104x1032x200 (checks/consumer-loop-*).
// Not yet done: B's three 32-column panels and C's chunks through rank-3 maps, one copy each where there are three, as
// the vendor's kernel does (its SASS loads and stores with UTMALDG.3D.MULTICAST and UTMASTG.3D, ours with the 2-D
// forms: checks/ncu-vs-vendor-pages.tar.gz); an order of the tiles along a space-filling curve; more staging buffers.

#include "13_tma_ws_split.cu"   // v13's wgmma_k_step, consume_ktiles, ClusterPlace, cluster helpers and store_tile

// Copy a box as tma_load_2d does, into the same offset of every block of the cluster in `ranks` (a bit each),
// completing on the barrier at `barrier`'s offset in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TensorMap& map, int x, int y,
                                                      unsigned barrier, unsigned short ranks)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4}], [%2], %5;"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(barrier), "r"(x), "r"(y),
                   "h"(ranks)
                 : "memory");
}

// Copy the box of shared memory at `src` to the matrix of `map` at element coordinates (x innermost, y); rows and
// columns past the matrix are not written. Completes in the issuing thread's current bulk group.
__device__ __forceinline__ void tma_store_2d(const TensorMap& map, unsigned src, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 ::"l"(reinterpret_cast<unsigned long long>(&map)), "r"(src), "r"(x), "r"(y)
                 : "memory");
}

__device__ __forceinline__ void bulk_commit()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Until at most PENDING of this thread's bulk groups still read their shared memory.
template <int PENDING>
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}

// The `threads` threads that meet at barrier `id` (1 to 15; 0 is __syncthreads') wait for each other.
__device__ __forceinline__ void named_barrier_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Chunk q of a consumer warpgroup's 64 x BN accumulators (d[4 j + e]: row 16 warp + g + 8 (e / 2), column
// 8 j + 2 t + e % 2), the ROW bytes a row (8 ROW / OUT columns) from column q * 8 ROW / OUT on, written at `buffer` as
// the TMA engine reads a box of [64, 8 ROW / OUT] with the ROW-byte swizzle (swizzled_offset<ROW>: 16-byte column c
// of row r at r * ROW + (c ^ (r * ROW / 128) % (ROW / 16)) * 16). A warp's rows g = 0..7 land in eight different
// 16-byte columns of their 128-byte lines at either width, so its stores meet no bank conflict.
template <int OUT, int ROW, int ACC>
__device__ __forceinline__ void stage_chunk(const float (&acc)[ACC], unsigned buffer, int q)
{
    constexpr int GROUPS = ROW / OUT;                 // column groups of 8 in a chunk: ROW / 16 bf16, ROW / 32 fp32
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4;
    const int t = lane % 4;
#pragma unroll
    for (int jj = 0; jj < GROUPS; ++jj) {
        const int j = q * GROUPS + jj;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = 16 * warp + g + 8 * half;
            const float x = acc[4 * j + 2 * half], y = acc[4 * j + 2 * half + 1];
            if constexpr (OUT == 16) {
                const unsigned at = buffer + swizzled_offset<ROW>(r, jj) + 4 * t;
                asm volatile("st.shared.b32 [%0], %1;" ::"r"(at), "r"(bf16_bits(x) | (bf16_bits(y) << 16))
                             : "memory");
            } else {
                const unsigned at = buffer + swizzled_offset<ROW>(r, 2 * jj + t / 2) + 8 * (t % 2);
                asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(at), "f"(x), "f"(y) : "memory");
            }
        }
    }
}

// STORE 2's form of stage_chunk for bf16 out: the calling warp's 16 rows of chunk q, four 8 x 8 matrices of bf16 a
// stmatrix (the accumulators' layout is the instruction's: d[4 j + 2 h + e] is row 8 h + g, column 8 j + 2 t + e of the
// warp's rows), so a row's 16 bytes of a column group go out in one piece. Lane l gives the address of row l % 8 of
// matrix l / 8: matrices 0 and 1 are column group jj, rows 0-7 and 8-15; 2 and 3 are group jj + 1.
template <int ROW, int ACC>
__device__ __forceinline__ void stage_warp_rows_bf16(const float (&acc)[ACC], unsigned buffer, int q)
{
    constexpr int GROUPS = ROW / 16;                  // 8-column groups in a chunk's row
    static_assert(GROUPS % 2 == 0, "two column groups a stmatrix");
    const int lane = threadIdx.x % 32;
    const int warp = (threadIdx.x / 32) % 4;
    const int r = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
    const int group_step = lane / 16;
#pragma unroll
    for (int jj = 0; jj < GROUPS; jj += 2) {
        const int j = q * GROUPS + jj;
        const unsigned at = buffer + swizzled_offset<ROW>(r, jj + group_step);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                     ::"r"(at), "r"(bf16_bits(acc[4 * j]) | (bf16_bits(acc[4 * j + 1]) << 16)),
                       "r"(bf16_bits(acc[4 * j + 2]) | (bf16_bits(acc[4 * j + 3]) << 16)),
                       "r"(bf16_bits(acc[4 * j + 4]) | (bf16_bits(acc[4 * j + 5]) << 16)),
                       "r"(bf16_bits(acc[4 * j + 6]) | (bf16_bits(acc[4 * j + 7]) << 16))
                     : "memory");
    }
}

template <int ELEM, int BT, int STAGES, int GROUP, int OUT, int CM, int STORE, int CWG = 2, int BN = 256, int CN = 1>
__global__ void __launch_bounds__(128 * (CWG + 1), 1)
gemm_tma_ws_multicast(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b,
                      const __grid_constant__ TensorMap map_c, void* C, int M, int N, int K, float alpha)
{
    constexpr int BK = 1024 / ELEM;                    // elements in a 128-byte row
    constexpr int TM = 64 * CWG;                       // rows of C per tile
    constexpr int ACC = BN / 2;
    constexpr int A_BYTES = TM * 128;
    // BT 0: B in boxes of BK k rows by B_PANEL columns, one swizzle panel each: 64 columns in 128-byte rows, or, where
    // BN is not a multiple of 64 (96), 32 columns in 64-byte rows with the 64-byte swizzle, so that the ring holds
    // exactly the BN columns multiplied.
    constexpr int B_PANEL = BT == 0 && BN % 64 != 0 ? 32 : 64;
    constexpr int B_BOXES = BN / B_PANEL;
    constexpr int B_BOX_BYTES = BK * B_PANEL * 2;
    constexpr int B_BYTES = BT == 0 ? B_BOXES * B_BOX_BYTES : BN * 128;
    constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    constexpr int KSTEPS = 4;                          // 32 bytes of K per wgmma
    constexpr int PRODUCER_REGISTERS = 40;
    constexpr int CONSUMER_REGISTERS = consumer_registers<CWG, PRODUCER_REGISTERS>();
    constexpr int RANKS = CM * CN;                     // blocks of a cluster: CM tile rows by CN tile columns
    constexpr int RELEASES = 4 * CWG * RANKS;          // lane 0 of each consumer warp of every rank
    constexpr int CHUNK_BYTES = 64 * 128;              // STORE 1, 2: a staging buffer, a chunk of 64 rows x 128 bytes
    // A chunk's rows are 128 bytes, or 64 where a slab's row is an odd number of 64-byte halves (bf16 at BN 96).
    constexpr int CHUNK_ROW = BN * OUT / 8 % 128 == 0 ? 128 : 64;
    constexpr int CHUNKS = BN * OUT / 8 / CHUNK_ROW;   // chunks in a warpgroup's 64 x BN slab
    constexpr int CHUNK_COLUMNS = 8 * CHUNK_ROW / OUT;
    static_assert(ELEM == 32 || ELEM == 16 || ELEM == 8, "tf32, bf16 or e4m3 inputs");
    static_assert(BT == 1 || ELEM == 16, "only bf16 wgmma reads an MN-major (row-major) B");
    static_assert(BT == 0 || BT == 1, "B row-major (0) or column-major (1)");
    static_assert(STAGES >= 2, "a ring of at least two stages");
    static_assert(OUT == 32 || OUT == 16, "fp32 or bf16 output");
    static_assert(CM == 1 || CM == 2 || CM == 4, "clusters of 1, 2 or 4 blocks along M");
    static_assert(CN == 1 || CN == 2 || CN == 4, "clusters of 1, 2 or 4 blocks along N");
    static_assert(RANKS <= 8, "a cluster of at most 8 blocks (the portable size)");
    static_assert(TM % (8 * CN) == 0, "each rank's share of the A tile is whole 8-row swizzle groups");
    static_assert(STORE >= 0 && STORE <= 2, "stores from registers (0) or through the copy engine (1 a warpgroup's "
                                            "chunk a copy, 2 a warp's rows of it)");
    static_assert(CWG >= 1 && CWG <= 3, "1, 2 or 3 consumer warpgroups");
    static_assert(BN == 256 || BN == 192 || BN == 128 || BN == 96 || BN == 64,
                  "a tile 256, 192, 128, 96 or 64 columns wide");
    static_assert(STORE == 0 || BN * OUT % 512 == 0, "the copy engine stores whole chunks of 128- or 64-byte rows");
    static_assert(BT == 0 || BN % (8 * CM) == 0, "each rank's share of K-major B is whole 8-row swizzle groups");
    static_assert(CWG < 3 || BN <= 192, "three consumer warpgroups have 152 registers a thread: BN / 2 accumulators "
                                        "of at most 96");

    extern __shared__ unsigned char smem_raw[];
    // STORE 1 and 2: 2 staging buffers a consumer warpgroup, between the stages and the barriers
    constexpr int STAGING_BYTES = (STORE == 0 ? 0 : 2 * CWG * CHUNK_BYTES);
    const RingLayout<STAGES, STAGE_BYTES, STAGING_BYTES> ring(shared_address(smem_raw));
    const unsigned staging = ring.gap();

    const int tid = threadIdx.x;
    const int warpgroup = __shfl_sync(0xffffffff, tid / 128, 0);   // one value a warp: see v13
    const ClusterPlace<RANKS> place;
    const int first = place.first, step = place.step;
    // The block's tile row in its unit, and its tile column (known to be 0 where CN is 1, so that those forms compile
    // as without the column).
    const int row_rank = CN == 1 ? place.rank : place.rank % CM;
    const int column_rank = CN == 1 ? 0 : place.rank / CM;
    const int tile_columns = (N + BN - 1) / BN;
    const int tile_rows = (M + TM - 1) / TM;
    const int unit_rows = (tile_rows + CM - 1) / CM;
    const int unit_columns = (tile_columns + CN - 1) / CN;
    const int units = unit_columns * unit_rows;
    const int ktiles = (K + BK - 1) / BK;
    if (tid == 32) {                                   // beside thread 0's ring_init, before the first copies
        prefetch_tensor_map(map_a);
        prefetch_tensor_map(map_b);
        if constexpr (STORE != 0) {
            prefetch_tensor_map(map_c);
        }
    }
    ring_init<STAGES>(ring.full, ring.empty, RELEASES);
    if constexpr (RANKS > 1) {
        cluster_sync_barriers_made();                  // every rank's barriers exist before a copy reaches them
    }

    if (warpgroup == 0) {
        if constexpr (CWG > 1) {
            registers_decrease<PRODUCER_REGISTERS>();
        }
        if (tid == 0) {
            // One box of B into this stage of every rank of the unit's tile column (of this block alone where CM is
            // 1); one box of A into every rank of its tile row (of this block alone where CN is 1).
            const unsigned short column_ranks = ((1u << CM) - 1) << (CM * column_rank);
            unsigned short row_ranks = 0;
#pragma unroll
            for (int c = 0; c < CN; ++c) {
                row_ranks |= 1u << (row_rank + CM * c);
            }
            const auto load_b = [&](unsigned dst, int x, int y, unsigned barrier) {
                if constexpr (CM == 1) {
                    tma_load_2d(dst, map_b, x, y, barrier);
                } else {
                    tma_load_2d_multicast(dst, map_b, x, y, barrier, column_ranks);
                }
            };
            const auto load_a = [&](unsigned dst, int x, int y, unsigned barrier) {
                if constexpr (CN == 1) {
                    tma_load_2d(dst, map_a, x, y, barrier);
                } else {
                    tma_load_2d_multicast(dst + column_rank * (A_BYTES / CN), map_a, x, y + column_rank * (TM / CN),
                                          barrier, row_ranks);
                }
            };
            int it = 0;                                // K-tiles loaded by this block so far
            for (int index = first; index < units; index += step) {
                const int2 unit = swizzled_tile_of<GROUP>(index, unit_columns, unit_rows);
                const int tile_row = (unit.y * CM + row_rank) * TM;
                const int tile_col = (unit.x * CN + column_rank) * BN;
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int slot = it % STAGES;
                    const unsigned stage = ring.stage(slot);
                    const unsigned barrier = ring.full_bar(slot);
                    ring_wait_free<STAGES>(ring.empty, it);
                    mbarrier_arrive_expect_tx(barrier, STAGE_BYTES);
                    load_a(stage, kt * BK, tile_row, barrier);
                    if constexpr (BT == 0) {
#pragma unroll
                        for (int j = B_BOXES * row_rank / CM; j < B_BOXES * (row_rank + 1) / CM; ++j) {
                            load_b(stage + A_BYTES + j * B_BOX_BYTES, tile_col + B_PANEL * j, kt * BK, barrier);
                        }
                    } else {
                        load_b(stage + A_BYTES + row_rank * (B_BYTES / CM), kt * BK, tile_col + row_rank * (BN / CM),
                               barrier);
                    }
                }
            }
            // The last STAGES fills released by every rank's consumers: no arrival reaches this block after it exits.
            for (int s = 0; s < STAGES; ++s, ++it) {
                ring_wait_free<STAGES>(ring.empty, it);
            }
        }
        return;
    }
    if constexpr (CWG > 1) {
        registers_increase<CONSUMER_REGISTERS>();
    }

    const int consumer = warpgroup - 1;
    const int last_steps = tail_ksteps<ELEM, KSTEPS>(K);   // the k steps of a tile's last K-tile
    // The thread that hands chunks to the copy engine: one a warpgroup (STORE 1), or one a warp (STORE 2).
    const bool issuer = tid % (STORE == 2 ? 32 : 128) == 0;
    int local = 0;                                     // the block's tiles so far
    for (int index = first; index < units; index += step, ++local) {
        const int2 unit = swizzled_tile_of<GROUP>(index, unit_columns, unit_rows);
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) {
            acc[i] = 0.0f;
        }
        consume_ktiles<KSTEPS, RANKS>(acc, ring, local * ktiles, ktiles, [&](unsigned stage, int s) {
            wgmma_k_step<ELEM, BT, BN, 2 * B_PANEL>(acc, stage + consumer * 64 * 128, stage + A_BYTES, s, B_BOX_BYTES);
        }, last_steps);
#pragma unroll
        for (int i = 0; i < ACC; ++i) {
            acc[i] *= alpha;
        }
        const int row0 = (unit.y * CM + row_rank) * TM + 64 * consumer;
        const int col0 = (unit.x * CN + column_rank) * BN;
        if constexpr (STORE == 0) {
            store_tile<OUT>(acc, C, M, N, row0, col0);
        } else {
            // STORE 1: the warpgroup stages a chunk, meets at its named barrier and its leader hands the chunk over.
            // STORE 2: each warp stages its own 16 rows of the chunk and hands them over itself (box [16, chunk
            // columns]), so that no warp of the warpgroup waits for another; warp w's rows start 16 w CHUNK_ROW bytes
            // into the buffer, a multiple of the swizzle's repeat.
            const int part_row = STORE == 1 ? 0 : 16 * ((tid / 32) % 4);   // the first row the issuer hands over
            const auto meet = [&] {
                if constexpr (STORE == 1) {
                    named_barrier_sync(1 + consumer, 128);
                } else {
                    __syncwarp();
                }
            };
#pragma unroll
            for (int q = 0; q < CHUNKS; ++q) {
                // The warpgroup's chunks alternate between its two buffers across tiles too: with an odd number of
                // chunks a tile (one at BN * OUT = 1024 bits, three at 3072), q alone would put a tile's first chunk
                // in the buffer of the last tile's last one, which the copy engine may still be reading.
                const int chunk = CHUNKS % 2 == 0 ? q : local * CHUNKS + q;
                const unsigned buffer = staging + (2 * consumer + chunk % 2) * CHUNK_BYTES;
                if (issuer) {
                    bulk_wait_read<1>();               // its store two back (from this buffer) has read it
                }
                meet();
                if constexpr (STORE == 2 && OUT == 16) {
                    stage_warp_rows_bf16<CHUNK_ROW>(acc, buffer, q);
                } else {
                    stage_chunk<OUT, CHUNK_ROW>(acc, buffer, q);   // each warp writes only its own rows
                }
                fence_proxy_async();                   // these writes before the copy engine's reads
                meet();
                if (issuer) {
                    tma_store_2d(map_c, buffer + part_row * CHUNK_ROW, col0 + q * CHUNK_COLUMNS, row0 + part_row);
                    bulk_commit();
                }
            }
        }
    }
    if (STORE != 0 && issuer) {
        // The block's shared memory must outlive the copy engine's reads of the last chunks; their writes to C
        // complete with the grid, so the block need not wait for them too.
        bulk_wait_read<0>();
    }
}
