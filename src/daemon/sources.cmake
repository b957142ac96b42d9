# The daemon's sources but main.c, relative to src/daemon: softrdmad
# (CMakeLists.txt here) and the control-socket fuzzer
# (tests/fuzz/target/CMakeLists.txt) compile the same list.
set(SR_DAEMON_SRCS
  client.c device.c heap.c life.c status.c control.c
  registry.c dispatch.c stall.c
  obj_fd.c obj_pd.c obj_mr.c obj_cq.c obj_wq.c obj_srq.c obj_qp.c obj_mcast.c
  cm/cm_request.c cm/cm_id.c cm/cm_addr.c cm/cm_proto.c cm/cm_mad_queue.c cm/cm_status.c
  cm/cm_wire.c cm/cm_neigh.c cm/cm_route_cache.c)
