"""Chinese messages, part 2: the stats card, charts, the per-token table, engine messages,
confidence, repetition and provenance (merged into ``visual.i18n.zh.MESSAGES``)."""

MESSAGES: dict[str, str] = {
    # ---- the stats card
    "st.t1_race": "本次竞速的自回归运行（{n} 次单词元前向传播）",
    "st.t1_calibration": "投机解码运行之后的 {n} 个词元的自回归校准运行",
    "st.c_formula": "c = {per} ÷ t₁ {t1} = {c}",
    "st.of_verify": "目标模型一次验证前向传播（{ms}）的 {share}",
    "st.no_target_step": "尚未测得可供比较的目标模型步骤",
    "st.cost_hybrid": "每词元起草代价与目标模型一步之比",
    "st.cost_hybrid_def": "草稿模型每个草稿词元的用时（MTP 与提示词查找的草稿合计；查找几乎为 0 毫秒）",
    "st.cost_mtp": "MTP 每词元起草代价与目标模型一步之比",
    "st.cost_mtp_def": "MTP 草稿模型每个草稿词元的用时",
    "st.per_token": "{ms}/词元",
    "st.of_vocab": "（共 {n} 个）",
    "st.split": "（{fixed} 个固定 + {extra} 个来自上下文）",
    "st.vocab": "MTP 草稿模型打分的词表比例",
    "st.vocab_def": "每个起草步骤对 {n}{of} 个词元{split}打分，而不是整个词表；其余词元的 q = 0",
    "st.empty": "第一步运行后，统计数据将显示在这里。",
    "st.alpha": "接受率 α",
    "st.alpha_def": "被接受的草稿 ÷ 目标模型评判过的草稿（{a} / {j}）；",
    "st.alpha_block": "块验证评判每个草稿",
    "st.alpha_token": "拒绝之后的草稿从不被评判",
    "st.tpc": "每次目标模型调用的词元数",
    "st.tpc_def": "新词元 ÷ 验证前向传播次数（{n} / {steps}）；自回归解码恰好为 1",
    "st.saved": "节省的目标模型调用",
    "st.saved_def": "{n} 个词元只用了 {steps} 次目标模型前向传播，而不是 {n} 次",
    "st.eff": "草稿效率",
    "st.eff_def": "被接受的 ÷ 全部草稿词元（{a} / {d}），包括浪费的草稿",
    "st.tps_value": "{v} 词元/秒",
    "st.tps": "投机解码吞吐量",
    "st.tps_def": "{n} 个词元，墙钟时间 {ms}，含预填充",
    "st.live": "实时……",
    "st.pending": "运行结束后这里才显示数字：在计算过程中绘制它们会拖慢它们所测量的运行。",
    "st.verify_median": "本次运行的目标模型前向传播：{n} 次的中位数为 {ms}，取自接口以 {field} 返回的逐次计时；可与同一请求的 {api} 运行相比较。",
    "st.title": "运行统计",
    "st.block_note": (
        "块验证（Sun 等，2025）：目标模型整体评判 γ 个草稿并保留通过的最长前缀，因此每个草稿都被评判，这里的 α 是保留数 ÷ 草稿数。"
        "下面的预测使用逐词元验证的 E，它假设每个草稿被独立接受；块验证平均每步保留的词元不少于此，因此请与实测加速比比较。"
    ),
    "st.measured": "实测加速比",
    "st.measured_def": "投机解码 词元/秒 ÷ 自回归 词元/秒（{spec} / {ar}），两次运行先后分别计时",
    "st.measured_wait": "等待自回归运行完成",
    "st.measured_none": "未测量：选择竞速模式以测量自回归基线",
    "st.same": "✓ 投机解码与自回归解码的输出逐词元完全相同。",
    "st.differ_sampling": "采样时（温度 > 0）两次运行是来自同一分布的不同样本，因此可能不同。",
    "st.differ_greedy": "温度为 0 时两者应当一致；差异来自浮点数的近似平局（批量与单词元矩阵乘法），最常见于 bfloat16。",
    "st.differ": "≠ 输出从第 {n} 个词元起不同。{why}",
    "st.t1_missing": "本次运行没有测量 t₁（目标模型对单个词元的一次前向传播），因此不显示 c、v<sub>γ</sub> 和 S。请使用竞速模式，或勾选“测量 t₁”进行一次简短的自回归校准运行。",
    "st.no_full_step": "还没有哪一步起草满 γ = {g} 个词元，因此尚未测得 v<sub>γ</sub>。",
    "st.early": (
        "草稿模型在 {steps} 步中有 {early} 步提前停止（它不确定），平均每步起草 {mean} 个词元，而不是 γ = {g}。"
        "该公式针对 γ 个草稿的链：它预测的是不提前停止的同一草稿模型；实测加速比包含了提前停止所节省的部分。"
    ),
    "st.v_low": "v<sub>γ</sub> < 1 表示对 γ+1 个词元的前向传播看起来比对单个词元更快：两次测量之间机器速度发生了变化（共享或繁忙的 CPU），因此该预测不可靠。请重新运行，或使用竞速模式。",
    "st.term.alpha": "实测接受率：被接受的 ÷ 被评判的草稿",
    "st.term.gamma": "每步提出的草稿数",
    "st.term.E": "(1 − α<sup>γ+1</sup>) / (1 − α)：若每个草稿以概率 α 独立被接受，每步的期望词元数",
    "st.term.t1": "目标模型对单个词元做一次前向传播的时间，由{source}测得",
    "st.term.t1_none": "（尚无）",
    "st.term.c": "草稿模型每个草稿词元的毫秒数 ÷ t₁ = {per} ÷ {t1}（所有草稿词元）",
    "st.term.v": "目标模型对 γ+1 个词元每次验证前向传播的毫秒数 ÷ t₁ = {verify} ÷ {t1}",
    "st.pred_title": "由实测 α、c 和 v<sub>γ</sub> 预测的加速比",
    "st.pred_note": "该预测忽略了预填充和每步的簿记开销，并假设接受是独立同分布的；请与实测加速比比较。",
    # ---- charts
    "ch.press_run": "点击“运行”查看此图表。",
    "ch.race": "词元数随墙钟时间变化",
    "ch.speculative": "投机解码",
    "ch.autoregressive": "自回归",
    "ch.running_speedup": "累计加速比",
    "ch.speedup_so_far": "截至此刻的加速比",
    "ch.speedup_axis": "加速比（×）",
    "ch.race_note": "两次运行在本机上先后分别计时（并非同时）；<br>t = 0 为各自运行的开始，含预填充。",
    "ch.ar_pending": "自回归运行进行中……<br>",
    "ch.solo": "仅投机解码运行；选择竞速模式以同时测量自回归基线。",
    "ch.wall_time": "墙钟时间（秒）",
    "ch.tokens_committed": "已确认的词元",
    "ch.acc": "各草稿位置的接受率",
    "ch.no_judged": "尚无被评判的草稿。",
    "ch.p_accept": "P(接受 | 被评判)",
    "ch.position_hover": "位置 %{x}：%{y:.2f}",
    "ch.overall_alpha": "总体 α = {alpha}",
    "ch.draft_position": "草稿位置 i（1 = 第一个草稿）",
    "ch.accepted_judged": "接受数 / 评判数",
    "ch.len": "每步被接受的草稿数",
    "ch.no_full": "还没有起草满 {gamma} 个草稿的步骤。",
    "ch.measured_steps": "实测（{n} 步）",
    "ch.len_hover": "接受 %{x} 个：%{y:.2f}（%{customdata} 步）",
    "ch.predicted_from": "由 α = {alpha} 预测",
    "ch.len_pred_hover": "接受 %{x} 个：%{y:.2f}",
    "ch.iid": "独立同分布预测",
    "ch.left_out": "（{n} 个较短的步骤未计入）",
    "ch.len_axis": "被接受的草稿数，仅含起草满 γ 个的步骤{note}",
    "ch.fraction": "步骤占比",
    "ch.time": "每步用时：起草与验证",
    "ch.draft": "起草",
    "ch.verify": "验证（目标模型一次前向传播）",
    "ch.verify_short": "验证",
    "ch.other": "其他（采样、轨迹记录）",
    "ch.other_short": "其他",
    "ch.step_ms_hover": "第 %{x} 步：%{y:.1f} 毫秒",
    "ch.tpc": "每次目标模型调用的词元数",
    "ch.tokens_this_step": "本步词元数",
    "ch.tpc_hover": "第 %{x} 步：%{y} 个词元",
    "ch.running_mean": "累计平均",
    "ch.mean_hover": "第 %{x} 步之后：%{y:.2f}",
    "ch.mean": "平均",
    "ch.ar_one": "自回归：1",
    "ch.step_axis": "步骤（每步目标模型前向传播一次）",
    "ch.step": "步骤",
    "ch.ms": "毫秒",
    "ch.tokens": "词元数",
    # ---- the per-token table as shown
    "col.run": "运行",
    "col.step": "步骤",
    "col.position": "位置",
    "col.kind": "类型",
    "col.token_id": "词元 id",
    "col.token": "词元",
    "col.q_draft": "q 草稿模型",
    "col.p_target": "p 目标模型",
    "col.p_over_q": "p/q",
    "col.accept_prob": "接受概率",
    "col.u": "u",
    "col.verdict": "判定",
    "col.committed": "已确认",
    "col.draft_ms": "起草毫秒",
    "col.verify_ms": "验证毫秒",
    "val.speculative": "投机解码",
    "val.autoregressive": "自回归",
    "val.draft": "草稿",
    "val.resample": "重新采样",
    "val.bonus": "奖励词元",
    "val.target": "目标模型",
    "val.accepted": "接受",
    "val.rejected": "拒绝",
    "val.not judged": "未评判",
    "val.resampled": "重新采样",
}
MESSAGES.update(
    {
        "run.shared": (
            "\n\n**共享前向传播：** {steps} 次目标模型前向传播中有 {shared} 次同时承载了其他访客的运行：平均每次服务 {mean} 个运行，"
            "因此本次运行的验证时间是它在每次前向传播中的份额（该次前向传播的时间 / 它服务的运行数）。"
            "在 float32 下，输出与该运行单独进行时相同；在 bfloat16 下，多行的前向传播与单行的舍入方式不同，"
            "几乎并列的候选（采样时则是某次抽样）可能落到另一边。"
        ),
        "run.shared_capped": (
            " 在这样的负载下，有 {capped} 步不带草稿、按普通方式解码（前向传播已满时服务器会降低投机程度）："
            "温度为 0 时这只改变速度；采样时输出仍从目标模型的分布中抽取。"
        ),
    }
)
MESSAGES.update(
    {
        "drafter.model": "草稿模型",
        "drafter.prompt-lookup": "提示词查找",
        "drafter.mtp": "MTP 头",
        "drafter.mtp+lookup": "MTP 头或提示词查找",
        "drafter.gemma4-assistant": "Gemma 4 MTP 助手模型",
        "drafter.early-exit": "目标模型的前几层（提前退出）",
        "drafter.other-tokenizer": "使用另一种分词器的草稿模型",
    }
)
MESSAGES.update({"ch.tokens_hover": "%{x:.2f} 秒：%{y} 个词元", "ch.speedup_hover": "%{x:.2f} 秒：%{y:.2f}×"})
MESSAGES.update({"di.end": "。"})
MESSAGES.update(
    {
        "legend.sure_name": "词元下方的条",
        "legend.sure_desc": "目标模型对该位置自己首选词元的把握（温度 1 下的 softmax；满宽 = 确定）。将鼠标悬停或聚焦在词元上可查看草稿模型给它的概率。",
        "sure.target": "目标模型在此处对自己首选词元的把握：{share}",
        "sure.drafter": "草稿模型给它的概率：{share}",
        "sure.copy": "草稿模型：复制而来，没有自己的概率",
        "st.loop_lookup": (
            "本次输出中有 {share} 重复了前面出现过的文本（模型在循环）。提示词查找可以免费复制重复的文本，"
            "因此这里的加速主要来自重复，而不是草稿模型对新文本的预测。换一个答案不会自我重复的提示词，才能看到草稿模型本身的效果。"
        ),
        "st.loop": "本次输出中有 {share} 重复了前面出现过的文本（模型在循环）。重复的文本很容易预测，因此这里的接受率更多反映的是循环，而不是草稿模型。",
        "pg.prov_dl": "⬇ 按来源着色的文本（HTML）",
    }
)
MESSAGES.update(
    {
        "pg.settings": "设置",
        "pg.key_hint": "步骤视图：左右方向键后退和前进一步，空格键播放或暂停",
        "st.rep": "重复前文的输出",
        "st.rep_def": "补全了提示词 + 此前输出中已出现过的 4-gram 的输出词元（{repeated} / {tokens}）；distinct-2 {d2}（输出中新出现的词对所占比例）",
        "prov.title": "每个词元从何而来",
        "prov.empty": "运行之后，这里会显示按来源着色的生成文本。",
        "prov.legend_aria": "各来源的词元数",
        "prov.detail": "{name}，第 {n} 步",
        "prov.detail_from": "{name}（{who}），第 {n} 步",
        "prov.mtp": "MTP 头",
        "prov.mtp.desc": "由 MTP 头起草，被目标模型接受",
        "prov.lookup": "提示词查找的副本",
        "prov.lookup.desc": "由提示词查找从前文复制，被接受",
        "prov.tree": "草稿树分支",
        "prov.tree.desc": "草稿树中被接受的节点",
        "prov.drafter": "其他草稿模型",
        "prov.drafter.desc": "由其他草稿模型起草，被接受",
        "prov.target": "目标模型的修正",
        "prov.target.desc": "目标模型自己的词元：拒绝后的重新采样，或本步没有草稿",
        "prov.bonus": "奖励词元",
        "prov.bonus.desc": "所有草稿都被接受：再从目标模型的 p 中取一个词元",
    }
)
MESSAGES.update(
    {
        # ---- the engine's errors and notices (playground.errors.ENGLISH: one key per code)
        "eng.temperature_finite": "温度必须是有限数值，收到的是 {value}",
        "eng.temperature_range": "温度必须为 0（贪心解码）或在 {lo} 到 {hi} 之间，收到的是 {value}",
        "eng.top_p_finite": "top_p 必须是有限数值，收到的是 {value}",
        "eng.top_p_range": "top_p 必须在 (0, 1] 之内，收到的是 {value}",
        "eng.seed_negative": "随机种子必须 >= 0，收到的是 {value}",
        "eng.one_of": "{name} 必须是 {choices} 之一，收到的是 {value}",
        "eng.verification": "验证方式必须是 {choices} 之一，收到的是 {value}",
        "eng.block_tree": "块验证评判的是草稿链而不是草稿树：请把草稿树节点数设为 1，或选择逐词元验证",
        "eng.tree_rule": "草稿树只能用无损规则验证，不能用 {rule}：请把 tree_nodes 设为 1",
        "eng.draft_stop": "停止阈值 draft_stop 必须是 [0, 1) 内的数（0 = 关闭），收到的是 {value}",
        "eng.bool": "{name} 必须是 true 或 false，收到的是 {value}",
        "eng.prompt_text": "提示词必须是文本",
        "eng.prompt_empty": "提示词为空：请至少输入一个词",
        "eng.prompt_long": "提示词过长：{n} 个字符（上限 {limit}）",
        "eng.number": "{name} 必须是数值，收到的是 {value}",
        "eng.number_plain": "{name} 必须是数值",
        "eng.number_like": "{name} 必须是类似 0.7 的数值，收到的是 {value}",
        "eng.between": "{name} 必须在 {lo} 到 {hi} 之间，收到的是 {value}",
        "eng.whole": "{name} 必须是整数，收到的是 {value}",
        "eng.whole_plain": "{name} 必须是整数",
        "eng.not_a_setting": "{name} 不是运行设置",
        "eng.name": "{name} 必须是名称，收到 {value}",
        "eng.unknown_preset": "未知预设 {preset}；可选：{choices}",
        "eng.no_drafter": "预设 {preset} 没有草稿模型 {drafter}；可选：{choices}",
        "eng.prompt_long_tokens": "提示词过长：{n} 个词元（上限 {limit}）",
        "eng.preset_unavailable": "预设 {preset} 在此不可用：{reason}",
        "eng.progress.speculative_continuations": "投机采样：{done} / {n} 条续写",
        "eng.progress.target_continuations": "只用目标模型：{done} / {n} 条续写",
        "eng.progress.statistics": "统计检验",
        "eng.progress.exact": "目标模型的精确概率",
        "eng.progress.done": "完成",
        "eng.progress.target_greedy": "只用目标模型（贪心解码）",
        "eng.progress.speculative_greedy": "投机解码（贪心解码）",
        "eng.progress.replay_divergence": "在分歧处重放两次前向传播",
        "eng.progress.warmup": "预热（最初几次前向传播较慢）",
        "eng.progress.target": "只用目标模型",
        "eng.progress.speculative": "投机解码",
        "eng.replay.shared": (
            "共享运行：一个完全相同的请求（相同的预设、提示词、设置和随机种子）于 {at} 启动了这次运行；"
            "你观看的是它的实时计算过程。计时数据来自那次运行。"
        ),
        "eng.replay.recorded": (
            "回放已记录的运行：一个完全相同的请求（相同的预设、提示词、设置和随机种子）于 {at} 计算完成；"
            "轨迹和计时数据都来自那次运行。"
        ),
        "eng.full_stop": "。",
    }
)
