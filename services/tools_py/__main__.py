from services.tools_py.main import main

main()
