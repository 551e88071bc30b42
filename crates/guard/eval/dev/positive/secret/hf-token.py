from huggingface_hub import login
login(token='hf_{{rand:letters:34}}')
