"""Chinese messages, part 3: the Classroom lab, the serving lesson and the Benchmark tab
(merged into ``visual.i18n.zh.MESSAGES``)."""

MESSAGES: dict[str, str] = {}

# ---- 课堂实验（visual/lab_tab.py、visual/lab_tabs/*）与“为全班服务”一课（visual/serving.py）
MESSAGES.update(
    {
        "lab.preset": "预设",
        "lab.temperature": "温度",
        "lab.seed": "随机种子",
        "lab.new_tokens": "新词元数",
        "lab.prompt": "提示词",
        "lab.stop": "■ 停止",
        "lab.stopping": "正在停止……",
        "lab.failed": "实验运行失败：{error}",
        "lab.whole": "{name} 必须是整数。",
        "lab.whole.got": "{name} 必须是整数，收到的是 {value}。",
        "lab.name.seed": "随机种子",
        "lab.name.tokens": "词元数",
        "lab.name.n": "N",
        "lab.name.tokens_per": "每条续写的词元数",
        # 相等性检查
        "lab.eq.tab": "相等性检查（贪心解码）",
        "lab.eq.intro": (
            "温度为 0 时，投机解码必须**逐词元**复现目标模型自己的贪心解码输出。把两者都运行一遍并比较。"
            "在 float32 下两者完全相同；在 bfloat16 下，单词元前向传播与多词元验证前向传播可能对几乎打平的候选"
            "做出不同的舍入，第一次出现这种翻转时会显示两个词元的 logits。"
        ),
        "lab.eq.run": "两者都运行 ▸",
        # 分布检查
        "lab.d.tab": "分布检查与错误规则",
        "lab.d.intro": (
            "分别用投机采样和只用目标模型抽取 **N** 条简短续写，比较两者的直方图。正确的规则在噪声范围内与目标模型一致；"
            "标为 ✗ 错误 的规则是真实实现中出现过的缺陷——观察它们如何偏离。~ 有损 规则用偏离换取接受率"
            "（每条续写 3 个词元时优势最明显：把它的*词元/前向传播*与正确规则比较）。"
            "大 N 请用 **tiny-random**（5,000 条只需几秒）。真实模型在双核 CPU 上每秒可抽取几十条续写"
            "（多条同时抽取，共用每次目标模型前向传播），N ≤ {n_slow}；"
            "在真实模型上，检查会在 {wall} 秒后停止并显示已收集的结果，标为部分结果（**■ 停止** 可以更早结束）。"
        ),
        "lab.d.rule": "验证规则",
        "lab.d.rule.info": "默认是正确的规则；其他规则都有标注。",
        "lab.d.rule.lossless": "✓ 正确：无损投机采样",
        "lab.d.rule.block": "✓ 正确：块验证——整体评判所有草稿（Sun 等，ICLR 2025）",
        "lab.d.rule.softmax-q": "✗ 错误 (a)：argmax 草稿却用草稿模型的 softmax q 来检验——transformers #32867",
        "lab.d.rule.exact-match": "≈ 浪费 (b)：T > 0 时要求完全匹配才接受——无损，但会拒绝好草稿",
        "lab.d.rule.target-sample": "✗ 错误 (c)：拒绝后直接输出目标模型的普通采样，而不是从残差分布采样",
        "lab.d.rule.bonus-wrong-position": "✗ 错误 (d)：奖励词元取自错误的位置（γ 而不是 γ+1）",
        "lab.d.rule.typical": "~ 有损但更快：Medusa 典型接受",
        "lab.d.n": "每侧续写条数 N",
        "lab.d.tokens": "每条续写的词元数",
        "lab.d.run": "运行检查 ▸",
        "lab.d.all": "比较所有规则",
        "lab.d.table": "本次会话检查过的规则（最新的在前）",
        "lab.d.help": (
            "**TV 距离** = ½ Σ |f_spec(x) − f_target(x)|：0 = 直方图完全相同，1 = 毫无重叠；同一分布的两组样本之间"
            "也会相差大约图中所示的*噪声水平*。**p 值**：如果两者来自同一分布，出现至少这么大差异的频率"
            "（卡方检验，罕见结果合并计算）。**与精确值比较的 p**：投机采样样本与目标模型精确概率（由其 logits 计算）的比较。"
            "**接受率** = 被接受的草稿数 ÷ 被评判的草稿数。"
        ),
        "lab.d.stopped": "已停止：没有计算新的结果。",
        "lab.d.done": "完成，用时 {seconds} 秒。",
        "lab.d.partial": "到达时间上限，{seconds} 秒后停止：完成 {done} / {total} 条续写——这是部分结果，并已如此标注。",
        "lab.d.all_done": "已在同一设置下检查所有规则：在表格中对比偏离程度（p 值、TV）与接受率。",
        "lab.d.all_stopped": "{seconds} 秒后停止（时间上限 {limit}）：已检查 {done} / {total} 条规则",
        "lab.d.not_checked": "，未检查：{rules}",
        "lab.d.partial_rows": "；标为部分结果的行所用续写少于要求的数量。",
        "lab.d.progress": "规则 {i}/{n}（{rule}）：{message}",
        # 理论实验台
        "lab.t.tab": "理论实验台",
        "lab.t.alpha": "α：接受概率",
        "lab.t.gamma": "γ：每步草稿数",
        "lab.t.c": "c：草稿代价 ÷ 目标代价",
        "lab.t.v": "v_γ：验证前向传播代价 ÷ 单词元代价",
        "lab.t.here": "你在这里：测量一次真实运行",
        "lab.t.measure": "测量（仅目标模型 + 投机解码，γ 取自滑块）▸",
        "lab.t.from_trace": "使用“回放与分享”中的轨迹",
        "lab.t.no_trace": "还没有轨迹：请先在“回放与分享”标签页中运行或导入一个。",
        # 先预测，再揭晓
        "lab.p.tab": "先预测，再揭晓",
        "lab.p.intro": (
            "先猜再看。**运行之前**，猜它的接受率。**每一步**都会显示草稿及草稿模型的置信度 q：勾选你认为目标模型会接受的草稿，"
            "然后揭晓 p、min(1, p/q)、随机数 u 和判定结果。你的得分在本次会话中保留。"
        ),
        "lab.p.rate": "你的猜测：这次运行的接受率（%）",
        "lab.p.new": "新一轮 ▸",
        "lab.p.guess": "目标模型会接受哪些草稿？",
        "lab.p.reveal": "揭晓",
        "lab.p.next": "下一步 ›",
        "lab.p.rate_reveal": "揭晓这次运行的接受率",
        "lab.p.over": "这次运行已结束。点击<b>揭晓这次运行的接受率</b>为你的猜测打分，或开始<b>新一轮</b>。",
        "lab.p.new_run": "新的运行：共 {n} 步，其中 {k} 步有草稿。你对接受率的猜测（{guess}%）已锁定。",
        "lab.p.no_drafts": "这次运行没有产生任何草稿（提示词查找没有找到匹配？）：请换一个提示词或预设。",
        "lab.p.already": "已经揭晓：请点击“下一步”。",
        "lab.p.start_first": "请先开始一轮。",
        "lab.p.rate_again": "这次运行的接受率：{actual}（已计分）。",
        "lab.p.rate_scored": "这次运行的接受率：{actual}（你猜的是 {guess}）；它在 {steps} 步中起草了 {drafted} 个词元。",
        # 回放与分享
        "lab.r.tab": "回放与分享",
        "lab.r.intro": (
            "在一次录制的运行中前后单步浏览，导入之前导出的轨迹 JSON（会检查大小、JSON 格式、结构和数值——其中的任何内容都不会被执行），"
            "并分发一个预先填好设置的链接。"
        ),
        "lab.r.classroom": "课堂预设",
        "lab.r.apply": "应用预设",
        "lab.r.run": "运行 ▸",
        "lab.r.file": "导入轨迹 JSON（≤ {mb} MB）",
        "lab.r.back": "◀ 后退",
        "lab.r.frame": "帧",
        "lab.r.fwd": "单步 ▶",
        "lab.r.export": "⬇ 导出这条轨迹（JSON）",
        "lab.r.share_btn": "生成分享链接",
        "lab.r.share": "分享链接（上方的设置）",
        "lab.r.fresh": "新的运行：",
        "lab.r.generated": "已生成。用 ◀ ▶ 或滑块单步浏览。",
        "lab.r.refused": "⛔ 无法导入此文件：{reason}。",
        "lab.r.refused_kind": "⛔ 无法导入此文件（{kind}）。",
        "lab.r.imported_from": "已导入 {name}：",
        "lab.r.imported": "已导入一条包含 {n} 步的轨迹。",
        "lab.r.nothing": "还没有可导出的内容。",
        "lab.r.unknown_classroom": "未知的课堂预设。",
        # 为全班服务
        "lab.sv.tab": "为全班服务",
        "lab.sv.measure": "现在在此服务器上测量前向传播代价（约 30 秒）▸",
        "sv.lesson": (
            "### 为全班服务：批处理与投机解码\n\n"
            "在这台 CPU 上，目标模型对少量词元的一次前向传播是**受内存带宽限制**的：读取 2.7 亿个权重的代价，"
            "无论这次前向传播携带一个词元还是几十个，都差不多。所以当三十名学生同时点击“运行”时，服务器不会一个接一个地"
            "运行三十个解码循环：每次运行保留自己的缓存、草稿和随机数流，但它们下一次的目标前向传播会合并为**一次前向传播**"
            "（连续批处理，vLLM、SGLang 和 TGI 都这样做）。每一行只看到自己的键。\n\n"
            "越过拐点之后，前向传播变为**受计算限制**：每多一个词元都要花真实的时间，被拒绝的草稿纯属浪费。"
            "单独运行时，投机解码把闲置的算力变成词元；负载高时已没有闲置算力，多行的普通解码更胜一筹。"
            "这就是服务器随负载增长而**调低**投机解码的原因：本服务器在各次运行之间分配每次前向传播的行词元预算"
            "（草稿上限 = 拐点 ÷ 运行数 − 1），因此满负载时每次运行都以普通方式解码。"
            "温度为 0 时输出从不改变，改变的只是速度。\n\n"
            "拐点来得多早取决于 CPU。有 AVX-512 BF16（或 AMX）时，bfloat16 下携带 9 个词元的一次前向传播"
            "只相当于 1.05–1.4 次单词元前向传播；只有 AVX2 时约为 2 次（那里多行的乘积以 float32 计算），"
            "所以即使单独运行，投机解码的收益也较小。下面的按钮会在本服务器上测量。\n\n"
            "若测量结果包含上限，虚线即这台机器的**上限**，在同一次测量中得到：每次前向传播只含这么多行、别无其他的普通解码。"
            "表格给出每个班级规模的吞吐量占上限的比例：调度器、每次运行的采样和排队所损失的部分。"
        ),
        "sv.variant.speculative, capped": "投机解码（有上限）",
        "sv.variant.speculative": "投机解码",
        "sv.variant.autoregressive": "自回归解码",
        "sv.hover.class": "同时 %{x} 个运行<br>全班每秒 %{y:.1f} 个词元",
        "sv.runs": "同时运行数",
        "sv.class_tps": "全班每秒词元数",
        "sv.throughput.title": "全班同时运行：吞吐量随共享前向传播的运行数变化",
        "sv.one_pass": "一次共享前向传播",
        "sv.rows_tokens": "{rows} 行 × {tokens} 个词元",
        "sv.hover.cost": "%{text}<br>单词元前向传播的 %{y:.2f} 倍",
        "sv.cost.x": "前向传播中的行词元数（行数 × 每行词元数）",
        "sv.cost.y": "代价 ÷ 一次单词元前向传播",
        "sv.cost.title": "一次共享的目标前向传播的代价",
        "sv.none": "还没有测量结果。",
        "sv.measured_now": "刚刚在此服务器上测量",
        "sv.measured": "测量结果",
        "sv.reproduce": "复现：",
        "sv.col.runs": "同时运行数",
        "sv.col.variant": "方式",
        "sv.col.tps": "全班每秒词元数",
        "sv.col.p50": "p50（秒）",
        "sv.col.p95": "p95（秒）",
        "sv.col.per_pass": "每次前向传播的运行数",
        "sv.split": "{model} · {own} · {wait}",
        "sv.col.split": "每次共享前向传播的毫秒数：模型 · 调度器 · 等待",
        "sv.ceiling": "上限",
        "sv.hover.ceiling": "上限：普通解码，每次前向传播 %{x} 行，别无其他<br>每秒 %{y:.1f} 个词元",
        "sv.share": "{ceiling} 的 {share}",
        "sv.col.of_ceiling": "占上限的比例（每秒词元数）",
    }
)

# ---- 基准测试标签页（visual/bench_tab.py、visual/bench.py）
MESSAGES.update(
    {
        "bench.intro": (
            "### 在本机上做基准测试\n"
            "在相同的提示词和模型上，把我们的解码循环与 `transformers` 自带的 `generate()` 及其提示词查找辅助生成进行计时比较，"
            "各方法交错运行，使机器的波动对每种方法的影响相同。在线运行规模很小（一两分钟）；完整版本请用命令行："
            "`python -m tools bench`。"
        ),
        "bench.preset": "预设",
        "bench.kind": "提示词",
        "bench.kind.grounded": "基于输入（编辑 / 复制 / 总结给定文本）",
        "bench.kind.general": "通用（开放式）",
        "bench.kind.custom": "我自己的提示词",
        "bench.custom": "你的提示词",
        "bench.custom.placeholder": "例如：粘贴一段文字，并要求修改其中的错误",
        "bench.drafters": "草稿模型",
        "bench.gammas": "块大小 γ（最多 4 个）",
        "bench.trees": "草稿树节点数（1 = 链；最多 3 个）",
        "bench.trees.info": "大于 1：草稿模型提出一棵有这么多节点的树，全部在目标模型的一次前向传播中验证；γ 限制其深度。",
        "bench.max_new": "每次运行的新词元数",
        "bench.temperature": "温度",
        "bench.repeats": "重复次数",
        "bench.with_hf": "包括 transformers 的 generate() 与辅助生成",
        "bench.run": "运行基准测试",
        "bench.table": "块大小 / 树大小 → 延迟、吞吐量、接受率、质量",
        "bench.help": "这些数字的含义",
        "bench.starting": "正在启动……（`{command}` 运行的是同一份代码）",
        "bench.running": "运行中 {done}/{total}：{label}",
        "bench.failed": "基准测试失败：{error}",
        "bench.note": "注：{note}",
        "bench.partial": "**部分结果：**{partial}（`limits.lab_wall_s`）；各行只使用这些轮次。",
        "bench.done": "完成：共 {n} 次测量运行。在命令行上复现：`{command}`",
        "bench.err.whole": "{name} 必须是整数。",
        "bench.err.range": "{name} 必须是 {lo} 到 {hi} 之间的整数。",
        "bench.err.tree_whole": "树大小必须是整数。",
        "bench.err.tree_none": "请至少选择一个树大小（1 = 链式草稿）。",
        "bench.err.tree_many": "在线运行最多选择 {n} 个树大小（命令行可以更多）。",
        "bench.err.tree_range": "树大小必须在 1（链）到 {n} 个节点之间。",
        "bench.err.tree_branch": "草稿树需要能分叉的草稿模型（{drafters}）：请选择其一，或只用树大小 1。",
        "bench.err.no_prompt": "请输入提示词，或选择一组提示词。",
        "bench.err.long": "提示词太长（{n} 个字符，上限 {limit}）。",
        "bench.err.no_set": "默认提示词集中没有 {kind} 类提示词。",
        "bench.err.drafter": "请至少选择一个此预设拥有的草稿模型：{drafters}。",
        "bench.err.gamma_whole": "γ 值必须是整数。",
        "bench.err.gamma_none": "请至少选择一个块大小 γ。",
        "bench.err.gamma_many": "在线运行最多选择 {n} 个块大小（命令行可以更多）。",
        "bench.err.temperature": "温度必须是数字。",
        "bench.name.new_tokens": "新词元数",
        "bench.name.repeats": "重复次数",
    }
)

# ---- 基准测试的图表、表格与摘要（visual/bench.py）
MESSAGES.update(
    {
        "bench.fig.throughput": "各块大小 γ 下的吞吐量（词元/秒）",
        "bench.fig.speedup": "相对我们的自回归循环的解码加速比：实测与预测",
        "bench.fig.acceptance": "各草稿位置的接受率",
        "bench.fig.costs": "每步的代价，以单词元目标前向传播计（γ·c + v_γ）",
        "bench.axis.gamma_drafts": "块大小 γ（每步草稿数）",
        "bench.axis.tps": "词元 / 秒",
        "bench.axis.gamma": "块大小 γ",
        "bench.axis.speedup": "加速比（×）",
        "bench.axis.position": "草稿位置",
        "bench.axis.acceptance": "接受率",
        "bench.axis.cost": "× 一次单词元目标前向传播",
        "bench.axis.ar": "自回归解码",
        "bench.trace.ours": "我们的",
        "bench.trace.hf_assisted": "HF 辅助生成",
        "bench.trace.tree": "树",
        "bench.trace.measured": "实测",
        "bench.trace.predicted": "预测",
        "bench.trace.step_mix": "按各步组合预测",
        "bench.trace.v": "v_γ（目标模型对 γ+1 个词元的前向传播）",
        "bench.method.speculative": "投机解码",
        "bench.method.autoregressive": "自回归解码",
        "bench.method.hf_generate": "HF 的 generate()",
        "bench.method.hf_assisted": "HF 辅助生成",
        "bench.col.prompts": "提示词",
        "bench.col.temperature": "T",
        "bench.col.dtype": "数据类型",
        "bench.col.trace": "轨迹",
        "bench.col.method": "方法",
        "bench.col.drafter": "草稿模型",
        "bench.col.gamma": "块大小 γ",
        "bench.col.tree_nodes": "草稿树节点数",
        "bench.col.ms_per_token": "延迟（毫秒/词元）",
        "bench.col.tokens_per_s": "吞吐量（词元/秒）",
        "bench.col.ceiling_tokens_per_s": "上限（词元/秒）",
        "bench.col.of_ceiling": "占上限之比",
        "bench.col.speedup_vs_autoregressive": "相对我们的自回归的加速比",
        "bench.col.speedup_vs_hf_generate": "相对 HF generate() 的加速比",
        "bench.col.acceptance_rate": "接受率",
        "bench.col.tokens_per_target_call": "词元 / 目标调用",
        "bench.col.c": "c",
        "bench.col.v": "v_γ",
        "bench.col.predicted_speedup": "预测",
        "bench.col.predicted_speedup_steps": "预测（按各步组合）",
        "bench.col.mean_accepted_length": "平均接受数",
        "bench.col.repeated_4gram_share": "重复 4 元组",
        "bench.col.distinct_2": "distinct-2",
        "bench.col.repetitive_runs": "重复性运行数",
        "bench.col.speedup_non_repetitive": "加速比（非重复性）",
        "bench.col.speedup_repetitive": "加速比（重复性）",
        "bench.col.draft_stop": "停止阈值",
        "bench.col.nodes_per_pass": "节点 / 前向传播",
        "bench.col.speedup_vs_chain": "相对链的加速比",
        "bench.col.v_measured": "运行中的 v",
        "bench.col.quality": "质量",
        "bench.metric_help": (
            "**延迟** = 每个新词元的实际耗时，含预填充 · **吞吐量** = 词元/秒 · "
            "**接受率** = 被接受的草稿 / 目标模型评判过的草稿（第一次拒绝之后的草稿从不被评判） · "
            "**词元 / 目标调用** = 解码阶段每次目标前向传播产生的新词元 · "
            "**c** = 草稿模型每起草一个词元的毫秒数 ÷ 一次单词元目标前向传播 · "
            "**v_γ** = 目标模型对 γ+1 个词元的一次前向传播 ÷ 对 1 个词元的一次，在相同缓存长度下背靠背计时 · "
            "**预测** = E(α, γ) / (γ·c + v_γ)，其中 E = (1 − α^(γ+1)) / (1 − α)，α 为实测值 · "
            "**质量** = 贪心解码的行是否与 `transformers` `generate()` 逐词元一致 · "
            "**重复 4 元组** = 输出词元中补全了提示词或先前输出里已有 4 元组的比例 · "
            "**distinct-2** = 输出中不同的二元组 / 全部二元组 · 至少 50% 的词元是重复的运行称为**重复性**运行 · "
            "**加速比（非重复性 / 重复性）** = 在相同提示词上我们的自回归循环的毫秒/词元 ÷ 本行的，只计这些运行"
            "（基础模型在贪心解码时会陷入循环，而复制循环几乎不花代价，所以请用非重复性一列来评判草稿模型）。"
        ),
        "bench.sum.end": "。",
        "bench.sum.none": "还没有结果。",
        "bench.sum.tree": "，{n} 个节点的草稿树",
        "bench.sum.fastest": (
            "最快：**{drafter}，γ={gamma}{tree}**，在{prompts}提示词上——每秒 {tps} 个词元，是我们的自回归循环的 **{speedup}×**"
        ),
        "bench.sum.vs_hf": "，是 `transformers` `generate()` 的 {x}×",
        "bench.sum.acceptance": "；接受率 {rate}",
        "bench.sum.predicted": "；预测 {x}×",
        "bench.sum.plain": "在非重复性输出上，最快的是 **{drafter}，γ={gamma}**（T={temperature}）：是我们的自回归循环的 **{speedup}×**",
        "bench.sum.against_rep": "，而在其重复性输出上为 {x}×",
        "bench.sum.rep_runs": "（{n} 次运行中 {k} 次为重复性）。",
        "bench.sum.ar": "我们的自回归循环的速度是 `generate()` 的 {x}×（{prompts}提示词，T={temperature}）。",
        "bench.sum.v": "实测 v_γ：{values}。",
        "bench.sum.trees": "草稿树：{items}（v：目标模型对根和所有节点的一次前向传播 ÷ 一次单词元前向传播）。",
        "bench.sum.tree_item": "{drafter} γ={gamma} 树 {nodes}：每次前向传播 {per_pass} 个节点",
        "bench.sum.tree_vs_chain": "，是链的 {x}×",
        "bench.sum.machine": "机器：{cpu}，{threads} 个 torch 线程，负载 {load}；共享 CPU 上的计时有噪声——各方法交错运行，使波动对它们的影响相同。",
        "bench.prompts.grounded": "基于输入的",
        "bench.prompts.general": "通用",
        "bench.prompts.custom": "自定义",
    }
)

# ---- 课堂实验的渲染（visual/lab.py）
MESSAGES.update(
    {
        "vlab.stopped": "已停止：{what}在完成前被取消，没有新的内容可显示。",
        "vlab.what.equality": "相等性检查",
        "vlab.partial": "部分结果。",
        "vlab.badge.correct": "✓ 正确",
        "vlab.badge.wrong": "✗ 错误",
        "vlab.badge.wasteful": "≈ 无损但浪费",
        "vlab.badge.lossy": "~ 有损",
        "vlab.d.title": "续写：投机采样与仅目标模型的对比",
        "vlab.d.empty": "点击“运行检查”绘制直方图。",
        "vlab.d.target": "仅目标模型（N = {n}）",
        "vlab.d.hover_target": "%{x}<br>仅目标模型：%{y:.4f}",
        "vlab.d.spec": "投机采样 · {rule}",
        "vlab.d.spec_partial": "（N = {n}，部分结果）",
        "vlab.d.hover_spec": "%{x}<br>投机采样：%{y:.4f}",
        "vlab.d.exact": "目标模型的精确概率",
        "vlab.d.hover_exact": "%{x}<br>精确值：%{y:.4f}",
        "vlab.d.x1": "续写（1 个词元）",
        "vlab.d.xn": "续写（{n} 个词元，· 分隔词元）",
        "vlab.d.y": "频率",
        "vlab.d.partial_title": "——部分结果（时间上限）",
        "vlab.d.choose": "选择一条规则并点击<b>运行检查</b>。",
        "vlab.d.tv": "TV 距离",
        "vlab.d.noise": "噪声水平 ≈ {x}",
        "vlab.d.p": "卡方检验 p 值",
        "vlab.d.p_hint": "两组样本 · {bins} 个区间",
        "vlab.d.p_exact": "与目标模型精确值比较的 p",
        "vlab.d.bins": "{bins} 个区间",
        "vlab.d.acceptance": "接受率",
        "vlab.d.acceptance_hint": "被接受的草稿 / 被评判的草稿",
        "vlab.d.tpp": "每次目标前向传播的词元数",
        "vlab.d.tpp_hint": "仅目标模型：1",
        "vlab.d.time": "用时",
        "vlab.d.time_hint": "{n} × 2 条续写",
        "vlab.d.time_partial": "{spec} + {target} / {n} × 2 条续写",
        "vlab.d.note": "注：{note}",
        "vlab.d.settings": "{preset} · 草稿模型 {drafter} · T = {t} · γ = {gamma} · 每条续写 {n} 个词元 · 随机种子 {seed}",
        "vlab.d.argmax": " · argmax 草稿",
        "vlab.d.reading": "解读：",
        "vlab.d.expected": "此规则的预期：{expect}",
        "vlab.col.rule": "规则",
        "vlab.col.kind": "类别",
        "vlab.col.N": "N",
        "vlab.col.TV": "TV",
        "vlab.col.noise TV": "噪声 TV",
        "vlab.col.p-value": "p 值",
        "vlab.col.p vs exact": "与精确值比较的 p",
        "vlab.col.acceptance": "接受率",
        "vlab.col.tokens/pass": "词元/前向传播",
        "vlab.col.vs correct": "相对正确规则",
        "vlab.col.verdict": "结论",
        "vlab.verdict.drift": "检测到偏离",
        "vlab.verdict.unclear": "不确定",
        "vlab.verdict.none": "未检测到偏离",
        "vlab.verdict.partial": "（部分样本）",
        "vlab.n_partial": "{n} / {total}（部分结果）",
        "vlab.eq.empty": "点击<b>两者都运行</b>，比较仅目标模型的贪心解码与投机贪心解码。",
        "vlab.eq.identical": "✓ 完全相同",
        "vlab.eq.diverged": "≠ 出现分歧",
        "vlab.eq.token": "第 {i} 个词元",
        "vlab.eq.same": "两者相同",
        "vlab.eq.tip_ar": "仅目标模型：{text}（id {id}）",
        "vlab.eq.tip_spec": "投机解码：{text}（id {id}）",
        "vlab.eq.legend": "每个色块是一个词元。相同的词元只显示一次；从第一处不同开始，上方色块是仅目标模型的贪心解码，下方色块是投机贪心解码。",
        "vlab.eq.aria": "逐词元比较",
        "vlab.eq.first": "第一处分歧：第 {i} 个词元",
        "vlab.eq.by": "logits 的计算方式",
        "vlab.eq.alone": "（仅目标模型）",
        "vlab.eq.spec": "（投机解码）",
        "vlab.eq.gap": "差值",
        "vlab.eq.row_ar": "仅目标模型 · 单词元前向传播",
        "vlab.eq.row_spec": "投机解码 · {rows} 个词元的验证前向传播",
        "vlab.eq.stats": "{preset} · 草稿模型 {drafter} · {dtype} · γ = {gamma} · 目标前向传播：仅目标模型 {ar} 次，投机解码 {spec} 次 · 接受率 {rate}",
        "vlab.t.formulas": "\n**每步期望词元数**：γ 个草稿，每个以概率 α（相互独立）被接受：\n$${e_tex}$$\n相对仅用目标模型的**预测加速比**，以一次单词元目标前向传播为单位：\n$${s_tex}$$\n*c* = 一个草稿词元的代价 ÷ 目标模型对 1 个词元做一次前向传播的代价；*v*<sub>γ</sub> = 目标模型对\nγ+1 个词元做一次前向传播的代价 ÷ 对 1 个词元的代价（GPU 上 ≈ 1，CPU 上 1.3–2）。只有在 S > 1 时投机解码才划算。\n",
        "vlab.t.S": "预测加速比 S",
        "vlab.t.E": "每步词元数 E",
        "vlab.t.best": "最佳 γ = {gamma}",
        "vlab.t.best_text": "最佳 γ = {gamma}：{speedup}×",
        "vlab.t.break_even": "盈亏平衡（S = 1）",
        "vlab.t.how.measured": "实测",
        "vlab.t.how.sliders": "实测的 α，c 和 v_γ 取自滑块",
        "vlab.t.how.predicted": "由实测的 α、c、v_γ 预测",
        "vlab.t.here": "你在这里",
        "vlab.t.here_how": "你在这里（{how}）",
        "vlab.t.y2": "E（每步词元数）",
        "vlab.t.x": "γ（每步草稿数）",
        "vlab.t.y": "S（相对仅目标模型的速度倍数）",
        "vlab.t.E_at": "γ = {gamma} 时的 E",
        "vlab.t.tps": "每步词元数",
        "vlab.t.S_at": "γ = {gamma} 时的 S",
        "vlab.t.predicted": "预测",
        "vlab.t.best_tile": "最佳 γ",
        "vlab.t.pays": "按这些数字，投机解码是划算的：γ = {gamma} 时最佳（{speedup}）。",
        "vlab.t.slower": "按这些数字，投机解码在每个 γ 下都比仅用目标模型更慢：相对于草稿被接受的频率（α），草稿的代价（c、v_γ）太高。",
        "vlab.t.measured": "实测运行：α = {alpha}，c = {c}，v<sub>γ</sub> = {v}，γ = {gamma}，每步平均接受草稿数 = {mean}；预测 S = {predicted}，实测 S = {measured}。",
        "vlab.t.no_single": "这条轨迹中没有可用于对比计时的单词元目标前向传播，因此无法从中测出 c 和 v<sub>γ</sub>：该点使用实测的 α 与滑块上的 c 和 v<sub>γ</sub>。要完整测量，请使用<b>测量</b>。",
        "vlab.t.alpha_note": "这里的 α 是被评判的草稿中被接受的比例；公式假设每个草稿以相同的 α 独立地被接受，而真实文本并不完全如此。",
        "vlab.q.empty": "点击<b>新一轮</b>：应用会生成一次运行，并在每次验证之前暂停。",
        "vlab.q.draft": "草稿 {i}",
        "vlab.q.q": "草稿模型的 q = {q}",
        "vlab.q.det": "这些草稿是确定性的（q = 1），所以草稿以概率 p(草稿) 保留下来。",
        "vlab.q.prob": "草稿以概率 min(1, p/q) 保留下来：草稿模型越有把握（q 越大），就越需要目标模型强烈认同。",
        "vlab.q.step": "<b>第 {i} 步</b> · 之后还有 {left} 步有草稿",
        "vlab.q.hint": "草稿模型的置信度：{qs}。{hint}勾选你认为目标模型会接受的草稿，然后点击“揭晓”。",
        "vlab.rv.right": "猜对 <b>{points} / {max}</b>",
        "vlab.rv.perfect": "——全对！",
        "vlab.rv.added": "随后目标模型添加了 {token}。",
        "vlab.rv.accept": "接受",
        "vlab.rv.reject": "拒绝",
        "vlab.rv.out.accepted": "已接受",
        "vlab.rv.out.rejected": "被拒绝",
        "vlab.rv.out.not judged": "未评判",
        "vlab.rv.h.draft": "草稿",
        "vlab.rv.h.guess": "你的猜测",
        "vlab.rv.h.outcome": "结果",
        "vlab.rv.note": "当 u &lt; min(1, p/q) 时草稿被接受。第一次拒绝之后，其余草稿不经评判直接丢弃。",
        "vlab.sc.score": "本次会话得分",
        "vlab.sc.drafts": "猜对的草稿",
        "vlab.sc.steps": "{steps} 步，{perfect} 步全对",
        "vlab.sc.rates": "接受率猜测",
        "vlab.sc.runs": "{n} 次运行",
        "vlab.sc.title": "你的得分（本次会话）",
        "vlab.sc.step": "第 {step} 步：{points}/{max}",
        "vlab.sc.step_exact": "第 {step} 步：{points}/{max} ✓ 全对",
        "vlab.sc.rate": "接受率猜测 {guess}，实际 {actual}：{points}/10",
        "vlab.sc.none": "没有被判定的草稿",
        "vlab.r.empty": "运行一次生成或导入一个轨迹 JSON 来回放。",
        "vlab.r.steps": "{n} 步",
        "vlab.r.tokens": "{n} 个词元",
        "vlab.r.acceptance": "接受率 {rate}",
        "vlab.r.drafter": "草稿模型 {name}",
        "vlab.r.preset": "预设 {v}",
        "vlab.r.temperature": "温度 {v}",
        "vlab.r.seed": "随机种子 {v}",
        "vlab.r.rule": "规则 {v}",
    }
)

MESSAGES.update({"vlab.cls.line": "`{preset}` · γ = {gamma} · T = {t} · 随机种子 {seed} · 分享链接参数 `{query}`"})

MESSAGES.update(
    {
        "vlab.link": "链接：",
        "vlab.link.classroom": "已从链接载入课堂预设“{name}”。",
        "vlab.link.settings": "已从链接载入设置：{settings}。",
        "vlab.link.prompt": "提示词",
        "vlab.link.ignored": "已忽略：{errors}。",
    }
)

MESSAGES.update(
    {
        "sv.provenance": "{what}（{date}，{machine}；{parts}）。",
        "sv.sep": "，",
        "sv.about.preset": "预设",
        "sv.about.dtype": "数据类型",
        "sv.about.drafter": "草稿模型",
        "sv.about.gamma": "γ",
        "sv.about.temperature": "温度",
        "sv.about.tokens": "词元数",
    }
)

# ---- 每条规则的说明（playground.rules）
MESSAGES.update(
    {
        "vlab.rule.lossless.what": "以概率 min(1, p(d)/q(d)) 接受草稿 d；拒绝后从 norm(max(0, p − q)) 重新采样；全部草稿之后，从位置 γ+1 的 p 中取一个奖励词元。",
        "vlab.rule.lossless.expect": "没有偏离：投机采样的直方图在采样噪声范围内与目标模型一致。",
        "vlab.rule.block.what": "每个草稿都有自己的 u；保留最长的前缀，使其最后一个草稿满足 u < h，其中 h 把沿块传递的权重 w = min(1, w·p/q) 与该位置剩余的残差质量结合起来（即使草稿自己的 u 没有通过，也可能被保留）。然后从 norm(max(0, w·p − q)) 重新采样，或在整个块之后取奖励词元。",
        "vlab.rule.block.expect": "没有偏离，与逐词元验证相同，并且平均保留的草稿至少一样多：把词元/前向传播（相对正确规则）与第一条规则比较。它的接受率把每个草稿都计为被评判过，而逐词元验证只计第一次拒绝之前的草稿。",
        "vlab.rule.softmax-q.what": "草稿模型起草的是它的 argmax（q 实际上是点质量），验证时却把草稿模型的 softmax 当作 q。草稿被接受得过于频繁，而残差分布又错误地排除了它。",
        "vlab.rule.softmax-q.expect": "偏向草稿模型偏爱的词元。需要在温度 > 0 时使用模型草稿。",
        "vlab.rule.exact-match.what": "从 p 中重新抽取一个词元，只有当它与草稿相同时才接受；不一致时输出这个样本。当 p = q 时，草稿保留下来的概率是 Σp² 而不是 1。",
        "vlab.rule.exact-match.expect": "从数学上看这是无损的：没有偏离（p 值不小），但接受率下降——请与正确规则的接受率比较。",
        "vlab.rule.target-sample.what": "拒绝后从 p 而不是 norm(max(0, p − q)) 中抽取词元，于是草稿模型本来就常提出的词元被计算了两次。",
        "vlab.rule.target-sample.expect": "偏向两个模型都喜欢的词元（p 与 q 的重叠部分被高估）。",
        "vlab.rule.bonus-wrong-position.what": "当所有草稿都被接受时，奖励词元从最后一个草稿所在位置的分布中采样（该分布看不到这个草稿），而不是从下一个位置采样。",
        "vlab.rule.bonus-wrong-position.expect": "在一个全部被接受的步骤之后的那个词元上出现偏离：在 2 个和 3 个词元的续写中可以看到。",
        "vlab.rule.typical.what": "若 p(d) > min(ε, δ·exp(−H(p)))（ε = 0.09，δ = 0.3）则接受 d；拒绝时输出一个来自 p 的样本。",
        "vlab.rule.typical.expect": "接受率更高（更快），偏离可以测量出来：这是服务系统可能选择的取舍。",
    }
)

# ---- the Benchmark's quality column (tools.bench.aggregate.QUALITY: one key per code)
MESSAGES.update(
    {
        "bench.q.reference": "参考",
        "bench.q.reference_sampled": "参考（采样）",
        "bench.q.identical": "与目标模型一致",
        "bench.q.identical_ar": "与我们的自回归解码一致",
        "bench.q.differs_ar": "与我们的自回归解码不同",
        "bench.q.differs_ar_bf16": "与我们的自回归解码不同（bfloat16 舍入）",
        "bench.q.not_compared": "未比较",
        "bench.q.differs_bf16": "从第 {fd} 个词元起不同（多词元前向传播的 bfloat16 舍入；float32 下精确）",
        "bench.q.differs_hf": "从第 {fd} 个词元起与 HF generate() 不同",
        "bench.q.lossless": "无损（精确采样）",
        "bench.q.lossy_drift": "有损：偏离 {tv} TV/词元",
        "bench.q.lossy": "有损",
    }
)
