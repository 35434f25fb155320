// Self-checking-by-comparison testbench for tcpeval_dropper (Icarus Verilog).
//
// The expected behaviour lives in Python (tcpeval.drop_model); this bench only replays a
// program and records what the DUT did:
//   +prog=<file>   $readmemh program, one command per line: {op[31:0], addr, data}
//                    op[3:0]=1 WRITE (op[11:8] = WSTRB), 2 READ, 3 STREAM data packets,
//                    4 IDLE data cycles, 5 RESET (pulse resetn), 0 END
//   +beats=<file>  $readmemh input beats {tlast, tuser, tkeep, tdata}, in packet order
//   +out=<file>    every beat the DUT forwarded (same format)
//   +log=<file>    one line per AXI-Lite response and per finished STREAM
//   +seed=<n> +valid_pct=<0..100> +ready_pct=<0..100>  stimulus randomness
// Protocol violations seen on the DUT's outputs are counted and reported as ERRORS.

`timescale 1ns / 1ps

module tb;
    parameter DW        = 256;
    parameter UW        = 128;
    parameter MAXBEATS  = 65536;
    parameter MAXPROG   = 4096;
    localparam KW = DW / 8;
    localparam BW = 1 + UW + KW + DW;

    reg clk = 1'b0;
    always #2.5 clk = ~clk;              // 200 MHz, the period is irrelevant here
    reg resetn = 1'b0;

    // ---- DUT wiring
    reg  [DW-1:0] s_tdata;  reg [KW-1:0] s_tkeep;  reg [UW-1:0] s_tuser;
    reg           s_tvalid = 1'b0, s_tlast;
    wire          s_tready;
    wire [DW-1:0] m_tdata;  wire [KW-1:0] m_tkeep; wire [UW-1:0] m_tuser;
    wire          m_tvalid, m_tlast;
    reg           m_tready = 1'b0;

    reg  [31:0] awaddr = 0, wdata = 0, araddr = 0;
    reg  [3:0]  wstrb = 0;
    reg         awvalid = 0, wvalid = 0, bready = 0, arvalid = 0, rready = 0;
    wire        awready, wready, bvalid, arready, rvalid;
    wire [1:0]  bresp, rresp;
    wire [31:0] rdata;

    tcpeval_dropper #(
        .C_M_AXIS_DATA_WIDTH(DW), .C_S_AXIS_DATA_WIDTH(DW),
        .C_M_AXIS_TUSER_WIDTH(UW), .C_S_AXIS_TUSER_WIDTH(UW)
    ) dut (
        .axi_aclk(clk), .axi_resetn(resetn),
        .m_axis_tdata(m_tdata), .m_axis_tkeep(m_tkeep), .m_axis_tuser(m_tuser),
        .m_axis_tvalid(m_tvalid), .m_axis_tready(m_tready), .m_axis_tlast(m_tlast),
        .s_axis_tdata(s_tdata), .s_axis_tkeep(s_tkeep), .s_axis_tuser(s_tuser),
        .s_axis_tvalid(s_tvalid), .s_axis_tready(s_tready), .s_axis_tlast(s_tlast),
        .S_AXI_ACLK(clk), .S_AXI_ARESETN(resetn),
        .S_AXI_AWADDR(awaddr), .S_AXI_AWVALID(awvalid), .S_AXI_AWREADY(awready),
        .S_AXI_WDATA(wdata), .S_AXI_WSTRB(wstrb), .S_AXI_WVALID(wvalid),
        .S_AXI_WREADY(wready), .S_AXI_BRESP(bresp), .S_AXI_BVALID(bvalid),
        .S_AXI_BREADY(bready), .S_AXI_ARADDR(araddr), .S_AXI_ARVALID(arvalid),
        .S_AXI_ARREADY(arready), .S_AXI_RDATA(rdata), .S_AXI_RRESP(rresp),
        .S_AXI_RVALID(rvalid), .S_AXI_RREADY(rready)
    );

    // ---- files and knobs
    reg [BW-1:0] beats [0:MAXBEATS-1];
    reg [95:0]   prog  [0:MAXPROG-1];
    reg [1023:0] f_prog, f_beats, f_out, f_log;
    integer fd_out, fd_log;
    integer rs, valid_pct, ready_pct;
    integer errors = 0;
    integer cycles = 0;

    always @(posedge clk) cycles <= cycles + 1;

    // ---- stream source: presents beats in order, random gaps, holds while stalled
    integer bp = 0;               // index of the next beat to present
    integer pkts_done = 0;        // packets whose last beat was accepted
    integer pkts_target = 0;      // packets the sequencer has asked for
    always @(posedge clk) begin
        if (resetn) begin
            if (s_tvalid && s_tready) begin
                if (s_tlast) pkts_done = pkts_done + 1;
                bp = bp + 1;
            end
            if (!s_tvalid || s_tready) begin
                if (pkts_done < pkts_target && ({$random(rs)} % 100) < valid_pct) begin
                    {s_tlast, s_tuser, s_tkeep, s_tdata} <= beats[bp];
                    s_tvalid <= 1'b1;
                end else begin
                    // Idle: put junk on the bus so the DUT must ignore invalid beats.
                    s_tvalid <= 1'b0;
                    s_tdata  <= {(DW/32+1){$random(rs)}};
                    s_tlast  <= $random(rs);
                end
            end
        end
    end

    // ---- stream sink: random backpressure, records every accepted beat
    reg [BW-1:0] held_beat;
    reg          held = 1'b0;
    always @(posedge clk) begin
        if (resetn) begin
            if (m_tvalid === 1'bx || s_tready === 1'bx) begin
                errors = errors + 1;
                $display("PROTOCOL_ERROR t=%0d: X on tvalid/tready", cycles);
            end
            // AXI4-Stream: once valid, the beat must stay unchanged until accepted.
            if (held && (!m_tvalid || {m_tlast, m_tuser, m_tkeep, m_tdata} !== held_beat)) begin
                errors = errors + 1;
                $display("PROTOCOL_ERROR t=%0d: beat changed or withdrawn while stalled", cycles);
            end
            if (m_tvalid && m_tready)
                $fdisplay(fd_out, "%h", {m_tlast, m_tuser, m_tkeep, m_tdata});
            held      = m_tvalid && !m_tready;
            held_beat = {m_tlast, m_tuser, m_tkeep, m_tdata};
            m_tready <= ({$random(rs)} % 100) < ready_pct;
        end
    end

    // ---- AXI-Lite master with random channel skew and response delays
    task axil_write(input [31:0] a, input [31:0] d, input [3:0] s);
        integer d1, d2;
        begin
            d1 = {$random(rs)} % 4;
            d2 = {$random(rs)} % 4;
            fork
                begin
                    repeat (d1) @(posedge clk);
                    awaddr <= a; awvalid <= 1'b1;
                    @(posedge clk); while (!awready) @(posedge clk);
                    awvalid <= 1'b0; awaddr <= $random(rs);
                end
                begin
                    repeat (d2) @(posedge clk);
                    wdata <= d; wstrb <= s; wvalid <= 1'b1;
                    @(posedge clk); while (!wready) @(posedge clk);
                    wvalid <= 1'b0; wdata <= $random(rs);
                end
            join
            repeat ({$random(rs)} % 3) @(posedge clk);
            bready <= 1'b1;
            @(posedge clk); while (!bvalid) @(posedge clk);
            bready <= 1'b0;
            $fdisplay(fd_log, "W %08h %1h", a, bresp);
        end
    endtask

    task axil_read(input [31:0] a);
        begin
            repeat ({$random(rs)} % 3) @(posedge clk);
            araddr <= a; arvalid <= 1'b1;
            @(posedge clk); while (!arready) @(posedge clk);
            arvalid <= 1'b0;
            repeat ({$random(rs)} % 3) @(posedge clk);
            rready <= 1'b1;
            @(posedge clk); while (!rvalid) @(posedge clk);
            rready <= 1'b0;
            $fdisplay(fd_log, "R %08h %1h %08h", a, rresp, rdata);
        end
    endtask

    // ---- sequencer
    integer pc;
    reg [31:0] op, addr, data;
    reg done;
    initial begin
        if (!$value$plusargs("prog=%s", f_prog) || !$value$plusargs("beats=%s", f_beats) ||
            !$value$plusargs("out=%s", f_out) || !$value$plusargs("log=%s", f_log)) begin
            $display("FATAL need +prog +beats +out +log");
            $finish;
        end
        if (!$value$plusargs("seed=%d", rs)) rs = 1;
        if (!$value$plusargs("valid_pct=%d", valid_pct)) valid_pct = 70;
        if (!$value$plusargs("ready_pct=%d", ready_pct)) ready_pct = 70;
        $readmemh(f_prog, prog);
        $readmemh(f_beats, beats);
        fd_out = $fopen(f_out, "w");
        fd_log = $fopen(f_log, "w");

        repeat (5) @(posedge clk);
        resetn <= 1'b1;
        repeat (2) @(posedge clk);

        done = 1'b0;
        for (pc = 0; pc < MAXPROG && !done; pc = pc + 1) begin
            {op, addr, data} = prog[pc];
            case (op[3:0])
                4'd0: done = 1'b1;
                4'd1: axil_write(addr, data, op[11:8]);
                4'd2: axil_read(addr);
                4'd3: begin
                    pkts_target = pkts_target + data;
                    while (pkts_done < pkts_target) @(posedge clk);
                    // Drain: the core holds at most two beats; wait until it is empty.
                    @(posedge clk);
                    while (m_tvalid) @(posedge clk);
                    $fdisplay(fd_log, "S %0d", data);
                end
                4'd4: repeat (data) @(posedge clk);
                4'd5: begin
                    // Hardware reset between bursts (the stream is idle here).
                    resetn <= 1'b0;
                    repeat (3) @(posedge clk);
                    resetn <= 1'b1;
                    repeat (2) @(posedge clk);
                end
                default: begin
                    $display("FATAL bad op %h at %0d", op, pc);
                    errors = errors + 1;
                    done = 1'b1;
                end
            endcase
        end
        repeat (4) @(posedge clk);
        $display("CYCLES %0d", cycles);
        $display("ERRORS %0d", errors);
        $fclose(fd_out);
        $fclose(fd_log);
        $finish;
    end
endmodule
