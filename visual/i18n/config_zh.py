"""Chinese for the visible text of ``spaces_config.yaml``: preset labels and descriptions, and
the labels of the Playground's classroom examples.  The English is the config's own; keys are
preset names and example labels, so tests/visual/test_i18n.py fails when the config gains an entry
this file lacks.  Model names, file paths and numbers stay as they are."""

PRESETS: dict[str, tuple[str, str]] = {
    "gemma3-270m-mtp": (
        "Gemma 3 270M · MTP 草稿模型 + 提示词查找（本项目训练）",
        "一个由本项目训练的 Gemma-4 风格多词元预测（MTP）头（先在 2 核 CPU 上训练，再在一块 GPU 上用目标模型自己写的 460 万个词元微调）：读取目标模型最后的隐藏状态和第 17 层的 KV 缓存，"
        "对 8,192 个候选词元打分，并在对草稿链没有把握时停止起草；当文本重复其上下文中的一段时，改由提示词查找起草这段副本（最多 8 个词元）。",
    ),
    "gemma3-270m-lookup": (
        "Gemma 3 270M · 提示词查找",
        "打包的 Gemma 3 270M 验证从其自身上下文中复制的 n-gram（无需第二个模型）。",
    ),
    "gemma3-270m-early-exit": (
        "Gemma 3 270M · 提前退出（由它自己 18 层中的前 17 层起草）",
        "自投机：由目标模型自己的前 17 层、最终归一化层和语言模型头起草，完整模型负责验证。未经训练的出口只在接近顶层时才与完整模型一致"
        "（第 9、12、15 层的已训练出口位于 playground/weights/gemma3-270m-exit），而且一个草稿几乎要付出一次完整前向传播的代价"
        "（语言模型头要完整计算），因此这里比普通解码更慢；步骤面板和基准测试展示了原因。",
    ),
    "gemma3-270m-early-exit-trained": (
        "Gemma 3 270M · 提前退出，已训练（18 层中的第 12 层 + 学得的出口映射）",
        "带已训练出口的自投机：目标模型 18 层中的前 12 层，接一个学得的 640x640 映射、最终归一化层和语言模型头起草"
        "（playground/weights/gemma3-270m-exit）；完整模型负责验证，保持不变。训练把该出口在留出文本上与完整模型的一致率从 0.34 提高到 0.60，"
        "但一个草稿仍要付出整个语言模型头的代价，因此这里仍比普通解码慢。",
    ),
    "smollm2-135m-lookup": (
        "SmolLM2-135M-Instruct · 提示词查找",
        "打包的 SmolLM2-135M-Instruct，使用提示词查找起草。",
    ),
    "tiny-random": (
        "tiny-random · 双模型（快速，文本无意义）",
        "进程内构建的两个随机初始化的微型模型。文本是乱码，但每种接受/拒绝/重新采样的路径都会在几秒内出现；适合用来做统计。",
    ),
    "gemma3-270m-smollm2": (
        "Gemma 3 270M ← SmolLM2-135M（另一种分词器）",
        "SmolLM2-135M-Instruct（词表 49k）为 Gemma 3 270M（词表 262k）起草——每一步都把它的文本解码后为 Gemma 重新分词，"
        "因此草稿会在两种分词器不一致处被截断。草稿是 SmolLM2 的 argmax（点质量），在任何温度下都是无损的。",
    ),
    "tiny-random-other-tokenizer": (
        "tiny-random · 使用另一种分词器的草稿模型（字节 → 字符）",
        "按 UTF-8 字节拼写（259 个 id）的微型随机草稿模型为使用字符分词器（100 个 id）的目标模型起草——每一步都把它的文本解码后为目标模型重新分词。"
        "它的草稿是 argmax（点质量），因此在任何温度下验证都保持无损。文本是乱码；用于测试和统计。",
    ),
    "hub-smollm2-360m": ("SmolLM2-360M ← SmolLM2-135M 草稿模型（Hub）", "经典的双模型组合，配一个真实的小型草稿模型。"),
    "hub-smollm2-1.7b": ("SmolLM2-1.7B ← SmolLM2-135M 草稿模型（Hub）", "目标模型比草稿模型大 13 倍。"),
    "hub-qwen2.5-1.5b": ("Qwen2.5-1.5B ← Qwen2.5-0.5B 草稿模型（Hub）", "共享同一分词器的 Qwen2.5 模型组合。"),
    "hub-qwen2.5-1.5b-smollm2": (
        "Qwen2.5-1.5B ← SmolLM2-135M 草稿模型（Hub，另一种分词器）",
        "SmolLM2-135M（词表 49k）为 Qwen2.5-1.5B（词表 151k）起草——每一步都把它的文本解码后为 Qwen 重新分词，"
        "因此草稿会在两种分词器不一致处被截断。草稿是 SmolLM2 的 argmax（点质量），在任何温度下都是无损的。",
    ),
    "hub-gemma4-e2b-mtp": (
        "Gemma 4 E2B ← 它的 MTP 助手模型（Hub，用于 GPU Space）",
        "Gemma 4 自带的多词元预测草稿模型读取目标模型最后的隐藏状态和共享的 KV 缓存，只对其最可能的词元簇中的词元打分；以无损方式验证"
        "（transformers 自带的辅助生成在采样时用 softmax q 评判这些 argmax 草稿，会使输出产生偏差）。",
    ),
}

EXAMPLES: dict[str, str] = {
    "Facts (easy)": "事实（简单）",
    "Copy-edit a paragraph (prompt lookup shines)": "校对一段文字（提示词查找大显身手）",
    "Code": "代码",
    "A list": "列表",
    "Story": "故事",
}
