/*
 * The behaviour tests: X(name, timeout in seconds).  Each is a function
 * test_<name>(void).  CMakeLists.txt reads this list to register one ctest
 * per test, so this is the only place a test is listed.
 */
#ifndef SR_BEHAVE_TESTS_H
#define SR_BEHAVE_TESTS_H

#define SR_TEST_LIST(X)                                                                            \
	X(rc_ops, 90)                                                                              \
	X(uc_ops, 90)                                                                              \
	X(ud_ops, 60)                                                                              \
	X(inline_send, 60)                                                                         \
	X(unsignaled, 60)                                                                          \
	X(post_errors, 60)                                                                         \
	X(atomic_length, 60)                                                                       \
	X(unreliable_drops, 60)                                                                    \
	X(srq_many_qps, 60)                                                                        \
	X(srq_limit, 60)                                                                           \
	X(srq_last_wqe, 60)                                                                        \
	X(mr_overlap, 60)                                                                          \
	X(mr_rereg, 60)                                                                            \
	X(mw_type1, 60)                                                                            \
	X(mw_type2, 60)                                                                            \
	X(ud_mcast, 60)                                                                            \
	X(err_local_prot, 60)                                                                      \
	X(err_remote_access, 60)                                                                   \
	X(err_length, 60)                                                                          \
	X(err_rnr_retry, 60)                                                                       \
	X(err_rnr_infinite, 60)                                                                    \
	X(err_flush, 60)                                                                           \
	X(err_destroy_drops_cqes, 60)                                                              \
	X(err_responder_sq_busy, 60)                                                               \
	X(err_peer_killed, 60)                                                                     \
	X(err_peer_killed_waiting, 60)                                                             \
	X(onesided_target_stopped, 60)                                                             \
	X(atomic_faa_4proc, 120)                                                                   \
	X(atomic_cas_2proc, 120)                                                                   \
	X(cq_event_blocking, 60)                                                                   \
	X(comp_channel_fd, 60)                                                                     \
	X(cq_overflow, 60)                                                                         \
	X(progress_peer_not_ready, 60)                                                             \
	X(progress_rts_modify_keeps_psns, 60)                                                      \
	X(progress_peer_not_ready_blocked, 60)                                                     \
	X(progress_rnr_blocked, 60)                                                                \
	X(progress_rnr_handoff, 60)                                                                \
	X(progress_rnr_handoff_srq, 60)                                                            \
	X(many_qps, 180)                                                                           \
	X(threads_write, 120)                                                                      \
	X(ud_many_to_one, 60)                                                                      \
	X(many_stalled_qps, 60)                                                                    \
	X(srq_many_waiting, 60)                                                                    \
	X(qp_ex_api, 60)                                                                           \
	X(cq_ex_api, 60)                                                                           \
	X(direct_path, 60)                                                                         \
	X(rq_freed_by_poll, 60)                                                                    \
	X(srq_freed_by_poll, 60)                                                                   \
	X(reclaim_waits_for_readers, 60)

#define SR_DECLARE_TEST(name, timeout) void test_##name(void);
SR_TEST_LIST(SR_DECLARE_TEST)

#endif
