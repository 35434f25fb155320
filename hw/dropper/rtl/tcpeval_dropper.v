// tcpeval_dropper: per-packet Bernoulli drop module (NetFPGA pcore).
//
// Sits between output port lookup and the output queues of the NetFPGA reference NIC.
// Semantics (register map, xorshift32, 33-bit compare, counters, reset values) are
// defined by src/tcpeval/drop_model.py; this file implements exactly that.
//
// Per packet, at its first beat and while ENABLE=1:
//     state <= xorshift32(state); SEEN += 1; drop iff xorshift32(state) < T (33 bit);
//     if drop: DROPPED += 1.
// All beats of a dropped packet are consumed (TREADY) and not forwarded.
//
// Same-cycle ordering: when an AXI-Lite write lands in the same clock as a packet's
// decision, the decision is taken first (with the old register values) and the write
// is applied after it. Hence RESEED/CLEAR/threshold writes simply take priority over
// the decision's own updates, which is what the sequential model does for
// "packet(); write(...)".
//
// Single clock domain: S_AXI_ACLK must be the same clock as axi_aclk (see README).
// Verilog-2001, synthesizable, no vendor primitives.

`timescale 1ns / 1ps

module tcpeval_dropper #(
    parameter C_M_AXIS_DATA_WIDTH  = 256,
    parameter C_S_AXIS_DATA_WIDTH  = 256,
    parameter C_M_AXIS_TUSER_WIDTH = 128,
    parameter C_S_AXIS_TUSER_WIDTH = 128,
    parameter C_S_AXI_DATA_WIDTH   = 32,
    parameter C_S_AXI_ADDR_WIDTH   = 32,
    // Used by EDK for the address map only; the core decodes offsets itself.
    /* verilator lint_off UNUSEDPARAM */
    parameter C_BASEADDR           = 32'hFFFFFFFF,
    parameter C_HIGHADDR           = 32'h00000000,
    /* verilator lint_on UNUSEDPARAM */
    // Offsets are decoded from the low address bits (a 4 KiB window, EDK's MIN_SIZE);
    // anything in the window beyond 0x1C answers SLVERR.
    parameter C_DECODE_BITS        = 12
) (
    // Stream clock and reset (active-low, synchronous)
    input  wire                                  axi_aclk,
    input  wire                                  axi_resetn,

    // Master stream: towards the output queues
    output wire [C_M_AXIS_DATA_WIDTH-1:0]        m_axis_tdata,
    output wire [C_M_AXIS_DATA_WIDTH/8-1:0]      m_axis_tkeep,
    output wire [C_M_AXIS_TUSER_WIDTH-1:0]       m_axis_tuser,
    output wire                                  m_axis_tvalid,
    input  wire                                  m_axis_tready,
    output wire                                  m_axis_tlast,

    // Slave stream: from output port lookup
    input  wire [C_S_AXIS_DATA_WIDTH-1:0]        s_axis_tdata,
    input  wire [C_S_AXIS_DATA_WIDTH/8-1:0]      s_axis_tkeep,
    input  wire [C_S_AXIS_TUSER_WIDTH-1:0]       s_axis_tuser,
    input  wire                                  s_axis_tvalid,
    output wire                                  s_axis_tready,
    input  wire                                  s_axis_tlast,

    // AXI4-Lite register slave (same clock as axi_aclk; S_AXI_ACLK exists for the EDK
    // bus binding only, and address bits above C_DECODE_BITS belong to the interconnect)
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                                  S_AXI_ACLK,
    input  wire                                  S_AXI_ARESETN,
    input  wire [C_S_AXI_ADDR_WIDTH-1:0]         S_AXI_AWADDR,
    input  wire                                  S_AXI_AWVALID,
    output wire                                  S_AXI_AWREADY,
    input  wire [C_S_AXI_DATA_WIDTH-1:0]         S_AXI_WDATA,
    input  wire [C_S_AXI_DATA_WIDTH/8-1:0]       S_AXI_WSTRB,
    input  wire                                  S_AXI_WVALID,
    output wire                                  S_AXI_WREADY,
    output wire [1:0]                            S_AXI_BRESP,
    output wire                                  S_AXI_BVALID,
    input  wire                                  S_AXI_BREADY,
    input  wire [C_S_AXI_ADDR_WIDTH-1:0]         S_AXI_ARADDR,
    input  wire                                  S_AXI_ARVALID,
    output wire                                  S_AXI_ARREADY,
    output wire [C_S_AXI_DATA_WIDTH-1:0]         S_AXI_RDATA,
    output wire [1:0]                            S_AXI_RRESP,
    output wire                                  S_AXI_RVALID,
    input  wire                                  S_AXI_RREADY
    /* verilator lint_on UNUSEDSIGNAL */
);

    // ------------------------------------------------------------------ constants
    localparam DW = C_S_AXIS_DATA_WIDTH;
    localparam KW = C_S_AXIS_DATA_WIDTH / 8;
    localparam UW = C_S_AXIS_TUSER_WIDTH;
    localparam BW = DW + KW + UW + 1;          // one beat: {tlast, tuser, tkeep, tdata}

    localparam [11:0] REG_CONTROL      = 12'h000;
    localparam [11:0] REG_THRESHOLD_LO = 12'h004;
    localparam [11:0] REG_THRESHOLD_HI = 12'h008;
    localparam [11:0] REG_SEED         = 12'h00C;
    localparam [11:0] REG_SEEN_LO      = 12'h010;
    localparam [11:0] REG_SEEN_HI      = 12'h014;
    localparam [11:0] REG_DROPPED_LO   = 12'h018;
    localparam [11:0] REG_DROPPED_HI   = 12'h01C;

    localparam [31:0] SEED_IF_ZERO = 32'h2545F491;
    localparam [11:0] DECODE_MASK  = 12'hFFF >> (12 - C_DECODE_BITS);
    localparam [1:0]  RESP_OKAY    = 2'b00;
    localparam [1:0]  RESP_SLVERR  = 2'b10;

    // Power-on values: the same as tcpeval.drop_model.DropModule() (threshold 0, seed 1,
    // enabled). Enabled with T = 0 forwards every packet and counts it, so a freshly
    // configured bitstream behaves as the plain reference NIC.
    localparam [32:0] RESET_THRESHOLD = 33'd0;
    localparam [31:0] RESET_SEED      = 32'd1;
    localparam        RESET_ENABLE    = 1'b1;

    wire clk = axi_aclk;
    // Either reset clears the whole core; both are synchronous and active-low.
    wire rst = ~axi_resetn | ~S_AXI_ARESETN;

    // ------------------------------------------------------------------ registers
    reg         enable_q;
    reg  [32:0] threshold_q;
    reg  [31:0] seed_q;
    reg  [31:0] state_q;
    reg  [63:0] seen_q;
    reg  [63:0] dropped_q;

    function [31:0] xorshift32;
        input [31:0] s;
        reg   [31:0] x;
        begin
            x = s ^ (s << 13);
            x = x ^ (x >> 17);
            x = x ^ (x << 5);
            xorshift32 = x;
        end
    endfunction

    wire [31:0] seed_effective = (seed_q == 32'd0) ? SEED_IF_ZERO : seed_q;

    // ------------------------------------------------------------------ stream path
    // Input side: beat accounting and the per-packet decision.
    reg  sop_q;         // next accepted beat is the first of a packet
    reg  dropping_q;    // the packet in progress (after its first beat) is being dropped

    wire        in_fire   = s_axis_tvalid & s_axis_tready;
    wire [31:0] draw      = xorshift32(state_q);
    wire        decide    = in_fire & sop_q & enable_q;
    wire        drop_now  = enable_q & ({1'b0, draw} < threshold_q);
    wire        beat_drop = sop_q ? drop_now : dropping_q;
    wire        push      = in_fire & ~beat_drop;

    always @(posedge clk) begin
        if (rst) begin
            sop_q      <= 1'b1;
            dropping_q <= 1'b0;
        end else if (in_fire) begin
            sop_q <= s_axis_tlast;
            if (sop_q)
                dropping_q <= drop_now;
        end
    end

    // Output side: a two-entry skid buffer. s_axis_tready and m_axis_tvalid come
    // straight from flops, so there is no combinational path between the two stream
    // interfaces (no loop through neighbouring cores) and throughput is one beat/clock.
    reg  [BW-1:0] out_beat_q, skid_beat_q;
    reg           out_valid_q, skid_valid_q;
    wire [BW-1:0] in_beat = {s_axis_tlast, s_axis_tuser, s_axis_tkeep, s_axis_tdata};

    assign s_axis_tready = ~skid_valid_q;
    assign m_axis_tvalid = out_valid_q;
    assign {m_axis_tlast, m_axis_tuser, m_axis_tkeep, m_axis_tdata} = out_beat_q;

    always @(posedge clk) begin
        if (rst) begin
            out_valid_q  <= 1'b0;
            skid_valid_q <= 1'b0;
        end else if (~out_valid_q | m_axis_tready) begin
            // Output register is free this cycle: refill from skid first (order).
            if (skid_valid_q) begin
                out_valid_q  <= 1'b1;
                skid_valid_q <= 1'b0;   // no push possible: s_axis_tready was low
            end else begin
                out_valid_q  <= push;
            end
        end else if (push) begin
            skid_valid_q <= 1'b1;       // output stalled: park the beat
        end
    end

    // Data registers carry no reset (wide, and only meaningful when valid).
    always @(posedge clk) begin
        if (~out_valid_q | m_axis_tready)
            out_beat_q <= skid_valid_q ? skid_beat_q : in_beat;
        if (push & ~skid_valid_q & out_valid_q & ~m_axis_tready)
            skid_beat_q <= in_beat;
    end

    // ------------------------------------------------------------------ AXI4-Lite
    // Write: AW and W are accepted independently (either order), the write is
    // performed once both are held and the B channel is free.
    reg                          aw_held_q, w_held_q, bvalid_q;
    reg  [11:0]                  awaddr_q;
    reg  [31:0]                  wdata_q;
    reg  [3:0]                   wstrb_q;
    reg  [1:0]                   bresp_q;

    reg                          rvalid_q;
    reg  [31:0]                  rdata_q;
    reg  [1:0]                   rresp_q;

    assign S_AXI_AWREADY = ~aw_held_q;
    assign S_AXI_WREADY  = ~w_held_q;
    assign S_AXI_BVALID  = bvalid_q;
    assign S_AXI_BRESP   = bresp_q;
    assign S_AXI_ARREADY = ~rvalid_q;
    assign S_AXI_RVALID  = rvalid_q;
    assign S_AXI_RDATA   = rdata_q;
    assign S_AXI_RRESP   = rresp_q;

    wire do_write = aw_held_q & w_held_q & ~bvalid_q;

    // Byte-lane merge of the held write data into a register's current value.
    function [31:0] merge;
        input [31:0] old;
        input [31:0] data;
        input [3:0]  strb;
        begin
            merge = { strb[3] ? data[31:24] : old[31:24],
                      strb[2] ? data[23:16] : old[23:16],
                      strb[1] ? data[15:8]  : old[15:8],
                      strb[0] ? data[7:0]   : old[7:0] };
        end
    endfunction

    wire [11:0] wr_off = awaddr_q;
    wire wr_control = do_write & (wr_off == REG_CONTROL) & wstrb_q[0];
    wire wr_th_lo   = do_write & (wr_off == REG_THRESHOLD_LO);
    wire wr_th_hi   = do_write & (wr_off == REG_THRESHOLD_HI) & wstrb_q[0];
    wire wr_seed    = do_write & (wr_off == REG_SEED);
    wire wr_ok      = (wr_off == REG_CONTROL) | (wr_off == REG_THRESHOLD_LO) |
                      (wr_off == REG_THRESHOLD_HI) | (wr_off == REG_SEED);
    wire ctl_reseed = wr_control & wdata_q[1];
    wire ctl_clear  = wr_control & wdata_q[2];

    always @(posedge clk) begin
        if (rst) begin
            aw_held_q <= 1'b0;
            w_held_q  <= 1'b0;
            bvalid_q  <= 1'b0;
            bresp_q   <= RESP_OKAY;
            awaddr_q  <= 12'd0;
            wdata_q   <= 32'd0;
            wstrb_q   <= 4'd0;
        end else begin
            if (S_AXI_AWVALID & ~aw_held_q) begin
                aw_held_q <= 1'b1;
                awaddr_q  <= S_AXI_AWADDR[11:0] & DECODE_MASK;
            end
            if (S_AXI_WVALID & ~w_held_q) begin
                w_held_q <= 1'b1;
                wdata_q  <= S_AXI_WDATA[31:0];
                wstrb_q  <= S_AXI_WSTRB[3:0];
            end
            if (do_write) begin
                aw_held_q <= 1'b0;
                w_held_q  <= 1'b0;
                bvalid_q  <= 1'b1;
                // Read-only or unmapped offsets: no effect, SLVERR (the model raises).
                bresp_q   <= wr_ok ? RESP_OKAY : RESP_SLVERR;
            end else if (bvalid_q & S_AXI_BREADY) begin
                bvalid_q <= 1'b0;
            end
        end
    end

    // Read: one outstanding read; data sampled at the AR handshake.
    wire [11:0] rd_off = S_AXI_ARADDR[11:0] & DECODE_MASK;
    reg  [31:0] rd_value;
    reg         rd_ok;
    always @(*) begin
        rd_ok = 1'b1;
        case (rd_off)
            REG_CONTROL:      rd_value = {31'd0, enable_q};   // RESEED/CLEAR read 0
            REG_THRESHOLD_LO: rd_value = threshold_q[31:0];
            REG_THRESHOLD_HI: rd_value = {31'd0, threshold_q[32]};
            REG_SEED:         rd_value = seed_q;
            REG_SEEN_LO:      rd_value = seen_q[31:0];
            REG_SEEN_HI:      rd_value = seen_q[63:32];
            REG_DROPPED_LO:   rd_value = dropped_q[31:0];
            REG_DROPPED_HI:   rd_value = dropped_q[63:32];
            default: begin
                rd_value = 32'd0;
                rd_ok    = 1'b0;
            end
        endcase
    end

    always @(posedge clk) begin
        if (rst) begin
            rvalid_q <= 1'b0;
            rdata_q  <= 32'd0;
            rresp_q  <= RESP_OKAY;
        end else if (S_AXI_ARVALID & ~rvalid_q) begin
            rvalid_q <= 1'b1;
            rdata_q  <= rd_value;
            rresp_q  <= rd_ok ? RESP_OKAY : RESP_SLVERR;
        end else if (rvalid_q & S_AXI_RREADY) begin
            rvalid_q <= 1'b0;
        end
    end

    // ------------------------------------------------------------------ core state
    // Decision first, register write second (see header): later assignments win.
    always @(posedge clk) begin
        if (rst) begin
            enable_q    <= RESET_ENABLE;
            threshold_q <= RESET_THRESHOLD;
            seed_q      <= RESET_SEED;
            state_q     <= (RESET_SEED == 32'd0) ? SEED_IF_ZERO : RESET_SEED;
            seen_q      <= 64'd0;
            dropped_q   <= 64'd0;
        end else begin
            if (decide) begin
                state_q <= draw;
                seen_q  <= seen_q + 64'd1;
                if (drop_now)
                    dropped_q <= dropped_q + 64'd1;
            end
            if (wr_control)
                enable_q <= wdata_q[0];
            if (ctl_reseed)
                state_q <= seed_effective;
            if (ctl_clear) begin
                seen_q    <= 64'd0;
                dropped_q <= 64'd0;
            end
            if (wr_th_lo)
                threshold_q[31:0] <= merge(threshold_q[31:0], wdata_q, wstrb_q);
            if (wr_th_hi)
                threshold_q[32] <= wdata_q[0];
            if (wr_seed)
                seed_q <= merge(seed_q, wdata_q, wstrb_q);
        end
    end

    // Parameter sanity (elaboration-time; ignored by synthesis).
    // synthesis translate_off
    initial begin
        if (C_M_AXIS_DATA_WIDTH != C_S_AXIS_DATA_WIDTH ||
            C_M_AXIS_TUSER_WIDTH != C_S_AXIS_TUSER_WIDTH) begin
            $display("tcpeval_dropper: master and slave stream widths must match");
            $finish;
        end
        if (C_S_AXI_DATA_WIDTH != 32 || C_S_AXI_ADDR_WIDTH < 12 ||
            C_DECODE_BITS < 5 || C_DECODE_BITS > 12) begin
            $display("tcpeval_dropper: need 32-bit data, >=12 address bits, 5..12 decode bits");
            $finish;
        end
    end
    // synthesis translate_on

endmodule
